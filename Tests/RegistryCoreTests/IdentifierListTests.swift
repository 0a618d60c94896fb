import Testing
@testable import RegistryCore

/// `IdentifierList` behaves as an `Array` of the same identifiers. The oracle is `Array` itself:
/// every seeded random edit is made to both, and the list must then read as the array does.
@Suite struct IdentifierListTests {
    private func identifier(_ random: inout SplitMix64) -> Identifier {
        // Few values, so that equal identifiers are drawn often.
        Identifier(kind: IdentifierKind.allCases[Int(random.next() % 2)], value: UUID128(high: random.next() % 3, low: random.next() % 3))
    }

    /// Reads `list` as the array it must equal, element by element through its own indices.
    private func expectSame(_ list: IdentifierList, _ array: [Identifier], _ step: String) {
        #expect(list.count == array.count && list.isEmpty == array.isEmpty && list.isFull == (array.count == 2), "\(step)")
        var read = [Identifier]()
        for index in list.startIndex..<list.endIndex { read.append(list[index]) }
        #expect(read == array, "\(step)")
        #expect(Array(list) == array, "\(step)")
        #expect(list.description == array.description, "\(step)")
    }

    @Test func seededEditsReadAsTheArrayDoes() {
        var random = SplitMix64(seed: 0x1D_F1157)
        for round in 0..<400 {
            var list = IdentifierList()
            var array = [Identifier]()
            for step in 0..<Int(random.next() % 10 + 1) {
                let value = identifier(&random)
                let label = "round \(round) step \(step)"
                switch random.next() % 7 {
                case 0 where array.count < 2, 1 where array.count < 2:
                    list.append(value)
                    array.append(value)
                case 2 where !array.isEmpty:
                    let index = Int(random.next() % UInt64(array.count))
                    list[index] = value
                    array[index] = value
                case 3 where !array.isEmpty:
                    let index = Int(random.next() % UInt64(array.count))
                    #expect(list.remove(at: index) == array.remove(at: index), "\(label)")
                case 4 where array.count < 2:
                    let index = Int(random.next() % UInt64(array.count + 1))
                    list.insert(value, at: index)
                    array.insert(value, at: index)
                case 5:
                    let kind = IdentifierKind.allCases[Int(random.next() % 2)]
                    list = list.filter { $0.kind != kind }
                    array = array.filter { $0.kind != kind }
                case 6:
                    list.sort { ($0.kind, $0.value.low) < ($1.kind, $1.value.low) }
                    array.sort { ($0.kind, $0.value.low) < ($1.kind, $1.value.low) }
                default:
                    list.removeAll()
                    array.removeAll()
                }
                expectSame(list, array, label)
                // Equality and hashing follow the identifiers, however the list came to hold them.
                let rebuilt = IdentifierList(array)
                #expect(list == rebuilt && list.hashValue == rebuilt.hashValue, "\(label)")
            }
        }
    }

    @Test func listsOfOtherIdentifiersDiffer() {
        let a = Identifier(kind: .keychain, value: UUID128(high: 1, low: 1))
        let b = Identifier(kind: .idfv, value: UUID128(high: 1, low: 1))
        let zero = Identifier(kind: .keychain, value: .zero)
        let lists: [IdentifierList] = [[], [a], [b], [zero], [a, b], [b, a], [a, a], [zero, zero]]
        for (i, x) in lists.enumerated() {
            for (j, y) in lists.enumerated() {
                #expect((x == y) == (i == j), "\(x) against \(y)")
            }
        }
    }

    @Test func holdsTwoInPlace() {
        #expect(MemoryLayout<IdentifierList>.size <= 40)
        #expect(_isPOD(IdentifierList.self), "a list holds no reference, so that copying one is copying bytes")
    }
}
