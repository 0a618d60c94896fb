import Testing
@testable import RegistryCore

@Suite struct InternedTextTests {
    /// Texts long enough that a `String` keeps them on the heap, and short ones, from a seeded
    /// generator; the same seed gives the same texts.
    private static func texts(count: Int, seed: UInt64) -> [String] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { index in
            let vendor = "com.\(index % 2 == 0 ? "v" : "a-much-longer-vendor-name")\(random.next() % 5_000)"
            return index % 3 == 0 ? vendor : "\(vendor).app\(random.next() % 7)"
        }
    }

    @Test(arguments: [UInt64(1), 2])
    func aTextIsTheSameValueEachTimeItIsMadeThroughTheTablesGrowth(seed: UInt64) {
        let texts = Self.texts(count: 20_000, seed: seed)
        let first = texts.map(InternedText.init)
        for (index, text) in texts.enumerated() {
            // A string of its own, not the one the text was first made from.
            let again = InternedText(String(decoding: Array(text.utf8), as: UTF8.self))
            #expect(again == first[index])
            #expect(again.hashValue == first[index].hashValue)
            #expect(again.string == text)
            #expect(Array(again.utf8) == Array(text.utf8))
        }
        // The oracle: texts are equal exactly when their strings are. The generator repeats
        // texts, so both cases occur.
        var byString = [String: InternedText]()
        for (index, text) in texts.enumerated() {
            if let seen = byString[text] { #expect(seen == first[index]) } else { byString[text] = first[index] }
        }
        #expect(byString.count < texts.count, "the generator made no text twice")
        #expect(Set(byString.values).count == byString.count, "two different strings were made one text")
    }

    @Test func textsOrderByTheirBytes() {
        let texts = Self.texts(count: 2_000, seed: 3).map(InternedText.init)
        var random = SplitMix64(seed: 4)
        for _ in 0..<5_000 {
            let a = texts[Int(random.next() % UInt64(texts.count))]
            let b = texts[Int(random.next() % UInt64(texts.count))]
            #expect((a < b) == Array(a.string.utf8).lexicographicallyPrecedes(Array(b.string.utf8)), "\(a) < \(b)")
            // Exactly one of <, == and > holds.
            #expect([a < b, a == b, b < a].filter { $0 }.count == 1, "\(a), \(b)")
        }
        // Texts are told apart by their bytes: two spellings of "é" that `String` calls equal are
        // two texts, ordered (a vendor name decoded from a peer is not checked to be ASCII).
        let composed = InternedText("com.caf\u{E9}")
        let decomposed = InternedText("com.cafe\u{301}")
        #expect(composed.string == decomposed.string)
        #expect(composed != decomposed)
        #expect(decomposed < composed && !(composed < decomposed))
    }

    @Test func theEmptyTextIsATextToo() {
        let empty = InternedText("")
        #expect(empty == InternedText(""))
        #expect(empty.utf8.isEmpty)
        #expect(empty.string.isEmpty)
        #expect(empty != InternedText("a"))
    }

    @Test func threadsMakingTheSameTextsAtOnceGetOneValueEach() async {
        // Texts no other test makes, so that the tasks make them, not find them.
        let run = UInt64.random(in: 1 ... .max)
        let texts = Self.texts(count: 3_000, seed: 5).map { "\($0).run\(run)" }
        // Each task makes every text, in an order of its own, while the others do.
        let made = await withTaskGroup(of: [String: InternedText].self) { group in
            for task in 0..<8 {
                group.addTask {
                    var order = Array(texts.indices)
                    var random = SplitMix64(seed: UInt64(100 + task))
                    for index in order.indices.reversed() { order.swapAt(index, Int(random.next() % UInt64(index + 1))) }
                    var made = [String: InternedText]()
                    for index in order { made[texts[index]] = InternedText(texts[index]) }
                    return made
                }
            }
            return await group.reduce(into: [[String: InternedText]]()) { $0.append($1) }
        }
        for text in Set(texts) {
            let values = made.map { $0[text]! }
            #expect(values.allSatisfy { $0 == values[0] }, "\(text) was made as more than one text")
            #expect(values[0].string == text)
        }
    }

    /// The point of interning: names copy as plain words, so that an operation or a device
    /// reference counts no references when it is copied, whatever the names' lengths.
    @Test func namesAndADeviceReferenceCopyAsPlainData() {
        #expect(MemoryLayout<Vendor>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<BundleID>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(MemoryLayout<NodeID>.size == MemoryLayout<UnsafeRawPointer>.size)
        #expect(_isPOD(Vendor.self))
        #expect(_isPOD(BundleID.self))
        #expect(_isPOD(NodeID.self))
        #expect(_isPOD(DeviceRef.self))
    }

    @Test func vendorsBundlesAndNodesOfOneTextAreEqualAndKeepTheirOrder() throws {
        let long = "com.example-vendor-with-a-long-name"
        #expect(Vendor(trusted: long) == Vendor(trusted: String(long)))
        #expect(try BundleID(parsing: "COM.Example.App") == BundleID(parsing: "com.example.app"))
        #expect(try BundleID(parsing: "COM.Example.App").value == "com.example.app")
        #expect(Vendor(trusted: "com.a") < Vendor(trusted: "com.b"))
        // Node IDs order byte by byte (the merge rule's order): "1" is below "9".
        #expect(try NodeID("node-10") < NodeID("node-9"))
        #expect(try !(NodeID("node-9") < NodeID("node-9")))
        #expect(try NodeID("a-node-whose-name-is-past-fifteen-bytes") == NodeID(trusted: "a-node-whose-name-is-past-fifteen-bytes"))
    }
}
