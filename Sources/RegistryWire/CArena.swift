import Platform
import CProtobufC
import RegistryCore

/// Owns every C allocation made while one protobuf-c message graph is built, and frees them
/// all when it goes away. protobuf-c messages hold raw pointers to their strings, arrays and
/// sub-messages, so they must outlive `pack`; keep the arena alive with `withExtendedLifetime`.
///
/// Allocations are carved from blocks (a bump allocator) of 4 KiB, then each twice the last up
/// to 64 KiB, so a small message costs one `malloc` and a batch of a hundred registrations
/// (about 20 KB of structs) three, instead of one per field. Only plain C structs, pointers and
/// bytes are stored, so freeing the blocks without deinitialising anything is sound.
final class CArena {
    static let blockSize = 4096
    static let largestBlockSize = 64 << 10
    /// Every block handed out, freed in `deinit`.
    private var blocks: [UnsafeMutableRawPointer] = []
    private var cursor: UnsafeMutableRawPointer?
    private var remaining = 0
    /// The size of the next block, unless one allocation needs more.
    private var nextBlockSize = CArena.blockSize

    deinit {
        for block in blocks { free(block) }
    }

    /// `bytes` bytes aligned to 16, from the current block or a new one.
    func allocate(bytes: Int) -> UnsafeMutableRawPointer {
        let size = (max(bytes, 1) + 15) & ~15
        if size > remaining {
            let blockBytes = max(size, nextBlockSize)
            nextBlockSize = min(nextBlockSize * 2, Self.largestBlockSize)
            guard let block = malloc(blockBytes) else { fatalError("out of memory allocating \(blockBytes) bytes") }
            blocks.append(block)
            cursor = block
            remaining = blockBytes
        }
        let pointer = cursor!
        cursor = pointer + size
        remaining -= size
        return pointer
    }

    /// Bytes ahead of each allocation made by ``allocateRecordingSize(bytes:)``, which hold its size.
    static let sizeHeaderBytes = 16

    /// `bytes` bytes aligned to 16, preceded by a word holding `bytes` (see
    /// ``recordedSize(of:)``). protobuf-c's unpack allocates through this, so that a string
    /// field can be read with its length.
    func allocateRecordingSize(bytes: Int) -> UnsafeMutableRawPointer {
        let block = allocate(bytes: bytes + Self.sizeHeaderBytes)
        block.storeBytes(of: bytes, as: Int.self)
        return block + Self.sizeHeaderBytes
    }

    /// The size asked of ``allocateRecordingSize(bytes:)`` for `pointer`, which it returned.
    static func recordedSize(of pointer: UnsafeRawPointer) -> Int {
        (pointer - sizeHeaderBytes).load(as: Int.self)
    }

    /// A C copy of `value`.
    func new<T>(_ value: T) -> UnsafeMutablePointer<T> {
        let pointer = allocate(bytes: MemoryLayout<T>.stride).bindMemory(to: T.self, capacity: 1)
        pointer.initialize(to: value)
        return pointer
    }

    /// A C array of `values` (an array, or a slice of one), nil when empty (protobuf-c reads no
    /// pointer for a count of 0).
    func array<T>(_ values: some Collection<T>) -> UnsafeMutablePointer<T>? {
        guard !values.isEmpty else { return nil }
        let pointer = allocate(bytes: MemoryLayout<T>.stride * values.count).bindMemory(to: T.self, capacity: values.count)
        _ = UnsafeMutableBufferPointer(start: pointer, count: values.count).initialize(from: values)
        return pointer
    }

    /// A C array of `count` elements made by `element(index)`, nil when empty.
    func array<T>(count: Int, _ element: (Int) -> T) -> UnsafeMutablePointer<T>? {
        guard count > 0 else { return nil }
        let pointer = allocate(bytes: MemoryLayout<T>.stride * count).bindMemory(to: T.self, capacity: count)
        for index in 0..<count { (pointer + index).initialize(to: element(index)) }
        return pointer
    }

    /// The first text handed to ``string(_:)-(String)`` that holds a NUL byte: protobuf-c packs a
    /// string field up to its first NUL, so a message holding one must not be packed (see
    /// ``refuseTextWithNUL()``).
    private(set) var textWithNUL: String?

    /// Throws when a string of the message holds a NUL, which protobuf-c would cut short.
    func refuseTextWithNUL() throws(CodecError) {
        if let text = textWithNUL {
            throw .invalidField("\(text.debugDescription) holds a NUL byte, which a protobuf-c string field cannot carry")
        }
    }

    /// A NUL-terminated C copy of `text`.
    func string(_ text: String) -> UnsafeMutablePointer<CChar> {
        if textWithNUL == nil, text.containsNUL { textWithNUL = text }
        let count = text.utf8.count
        let raw = allocate(bytes: count + 1)
        let bytes = raw.bindMemory(to: UInt8.self, capacity: count + 1)
        _ = UnsafeMutableBufferPointer(start: bytes, count: count).initialize(from: text.utf8)
        bytes[count] = 0
        return raw.bindMemory(to: CChar.self, capacity: count + 1)
    }

    /// A NUL-terminated C copy of `value`'s text, written straight from the UUID when it is one.
    func string(_ value: UUIDText) -> UnsafeMutablePointer<CChar> {
        // Text that is not a UUID may hold a NUL, which packing would cut short (the fuzzer found
        // an identifier that changed on its way through the client's encoder).
        if textWithNUL == nil, value.containsNUL { textWithNUL = value.text }
        let count = value.utf8Count
        let bytes = allocate(bytes: count + 1).bindMemory(to: UInt8.self, capacity: count + 1)
        value.writeUTF8(to: bytes)
        bytes[count] = 0
        return UnsafeMutableRawPointer(bytes).bindMemory(to: CChar.self, capacity: count + 1)
    }

    /// A protobuf-c `bytes` field holding the 16 big-endian bytes of `uuid`.
    func bytes(_ uuid: UUID128) -> ProtobufCBinaryData {
        let raw = allocate(bytes: 16)
        raw.storeBytes(of: uuid.high.bigEndian, toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: uuid.low.bigEndian, toByteOffset: 8, as: UInt64.self)
        return ProtobufCBinaryData(len: 16, data: raw.bindMemory(to: UInt8.self, capacity: 16))
    }

    /// A protobuf-c `bytes` field holding a copy of `bytes`.
    func bytes(_ bytes: some Collection<UInt8>) -> ProtobufCBinaryData {
        guard let pointer = array(bytes) else { return ProtobufCBinaryData(len: 0, data: nil) }
        return ProtobufCBinaryData(len: bytes.count, data: pointer)
    }
}

/// Reading helpers for unpacked protobuf-c messages.
enum CRead {
    /// A string field of a message unpacked by ``ProtobufC/withUnpacked(_:name:unpack:_:)``,
    /// read with its length: a NUL inside it is kept, to be refused by the rule for the field,
    /// rather than cutting it short.
    static func string(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        withUTF8(pointer) { String(decoding: $0, as: UTF8.self) }
    }

    /// A string field that is usually UUID text, without making a `String` when it is.
    static func uuidText(_ pointer: UnsafeMutablePointer<CChar>?) -> UUIDText {
        withUTF8(pointer) { UUIDText(utf8: $0) }
    }

    /// The bytes of a string field, all of them.
    ///
    /// protobuf-c keeps a string field as a NUL-terminated copy and drops its length. It
    /// allocates that copy, through the unpacking arena, as exactly the length plus one byte for
    /// the NUL it appends; the arena records each allocation's size, so the length is that size
    /// less one. A field the message did not carry holds protobuf-c's shared empty string, which
    /// no arena allocated. Should a protobuf-c release allocate otherwise, the NUL is not where
    /// the size says, and the bytes up to the first NUL are all that can be read
    /// (`CodecRoundTripTests` fails then).
    private static func withUTF8<Result>(
        _ pointer: UnsafeMutablePointer<CChar>?, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        guard let pointer, UnsafeRawPointer(pointer) != UnsafeRawPointer(registry_protobuf_c_empty_string()) else {
            return body(UnsafeBufferPointer(start: nil, count: 0))
        }
        var length = CArena.recordedSize(of: pointer) - 1
        if length < 0 || pointer[length] != 0 { length = strlen(pointer) }
        return UnsafeRawPointer(pointer).withMemoryRebound(to: UInt8.self, capacity: length + 1) { bytes in
            body(UnsafeBufferPointer(start: bytes, count: length))
        }
    }

    /// A 16-byte field as a UUID; nil for any other length.
    static func uuid(_ data: ProtobufCBinaryData) -> UUID128? {
        guard let pointer = data.data else { return nil }
        return uuid(UnsafeRawBufferPointer(start: pointer, count: data.len))
    }

    /// 16 bytes, big-endian, as a UUID; nil for any other length (the wire form of a `bytes`
    /// field that holds one, read by protobuf-c or directly).
    static func uuid(_ bytes: UnsafeRawBufferPointer) -> UUID128? {
        guard bytes.count == 16 else { return nil }
        return UUID128(
            high: UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
            low: UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
    }

    static func bytes(_ data: ProtobufCBinaryData) -> [UInt8] {
        guard let pointer = data.data, data.len > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: pointer, count: data.len))
    }

    /// A repeated message field: `count` pointers to sub-messages.
    static func messages<Message, Result>(
        _ count: Int, _ items: UnsafeMutablePointer<UnsafeMutablePointer<Message>?>?,
        _ transform: (Message) throws(CodecError) -> Result
    ) throws(CodecError) -> [Result] {
        guard let items, count > 0 else { return [] }
        var result = [Result]()
        result.reserveCapacity(count)
        for index in 0..<count {
            guard let item = items[index] else { continue }
            result.append(try transform(item.pointee))
        }
        return result
    }

    /// A repeated integer field.
    static func integers(_ count: Int, _ items: UnsafeMutablePointer<UInt64>?) -> [UInt64] {
        guard let items, count > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: items, count: count))
    }

    /// A repeated string field.
    static func strings(_ count: Int, _ items: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> [String] {
        guard let items, count > 0 else { return [] }
        return (0..<count).map { string(items[$0]) }
    }
}
