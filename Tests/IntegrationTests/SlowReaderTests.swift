import Foundation
import NIOCore
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
import Platform

/// A client that pipelines requests and never reads its answers must not be able to take the
/// node's memory: the node stops reading from it, TCP pushes back, and everyone else is served.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SlowReaderTests {
    /// What one connection may add to the node's resident memory: the bytes of one read cycle
    /// (16 reads of up to 64 KiB), the answers of `--max-in-flight` requests, the write buffer's
    /// 256 KiB high water mark, and the allocator's slack around them.
    static let memoryBound = 8 << 20
    static let requests = 1_000_000

    @Test func aClientThatNeverReadsIsHeldBackInBoundedMemoryAndGetsEveryAnswerInOrderLater() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(dataDirectory: temp.path)
        defer { node.stop() }
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "bystander")
        let device = try await client.register(RegisterRequest(bundleID: "com.slow.app", idfv: UUID().uuidString)).deviceID

        // One million resolves of that device, pipelined, each in a frame of its own, written by
        // hand (ClientFrame{request_id: 1, resolve_device: 5 {device_id: 1}}) so that the test's
        // own CPU stays small beside the node's.
        let body = ProtoBytes().message(5, ProtoBytes().string(1, device)).bytes
        let frameBytes = 4 + 1 + 3 + body.count  // request IDs up to 2^21 take 3 varint bytes at most
        var bytes = [UInt8](repeating: 0, count: Self.requests * frameBytes)
        let written = bytes.withUnsafeMutableBufferPointer { out -> Int in
            var at = 0
            for id in 1...UInt64(Self.requests) {
                let idBytes = id < 1 << 7 ? 1 : id < 1 << 14 ? 2 : 3
                let length = 1 + idBytes + body.count
                out[at] = 0
                out[at + 1] = UInt8(length >> 16)
                out[at + 2] = UInt8(truncatingIfNeeded: length >> 8)
                out[at + 3] = UInt8(truncatingIfNeeded: length)
                out[at + 4] = 0x08
                at += 5
                var value = id
                for index in 0..<idBytes {
                    out[at + index] = UInt8(truncatingIfNeeded: value & 0x7F) | (index < idBytes - 1 ? 0x80 : 0)
                    value >>= 7
                }
                at += idBytes
                for byte in body {
                    out[at] = byte
                    at += 1
                }
            }
            return at
        }
        bytes.removeLast(bytes.count - written)
        let raw = try RawConnection(port: node.port)
        defer { raw.close() }
        #expect(try raw.sendHello() != nil)
        let baseline = try #require(node.residentBytes)

        // Send without reading until the socket takes nothing for 2 s: the node stopped reading.
        var sent = 0
        let pushedBack = bytes.withUnsafeBytes { all -> Bool in
            while sent < all.count {
                let taken = raw.sendAvailable(UnsafeRawBufferPointer(rebasing: all[sent...]))
                sent += taken
                if taken == 0, !raw.waitWritable(milliseconds: 2_000) { return true }
            }
            return false
        }
        #expect(pushedBack, "the node read all \(bytes.count) bytes of a client that reads nothing")
        let held = try #require(node.residentBytes)
        #expect(
            held - baseline < Self.memoryBound,
            "resident memory grew by \(held - baseline) bytes (bound \(Self.memoryBound)) holding a client that does not read")

        // Everyone else is still served meanwhile.
        let other = try await client.register(RegisterRequest(bundleID: "com.slow.other", idfv: UUID().uuidString))
        #expect(try await client.resolve(deviceID: other.deviceID).deviceID == other.deviceID)

        // Once the client reads, it gets every answer, in order, and the rest of its requests go in.
        let reader = Thread.detachedResult { Self.readAnswers(raw, expecting: Self.requests, device: device) }
        bytes.withUnsafeBytes { all in
            while sent < all.count {
                let taken = raw.sendAvailable(UnsafeRawBufferPointer(rebasing: all[sent...]))
                sent += taken
                if taken == 0, !raw.waitWritable(milliseconds: 10_000) { return }
            }
        }
        #expect(sent == bytes.count)
        let (answers, inOrder, wrong) = await reader.value
        #expect(answers == Self.requests, "\(answers) of \(Self.requests) answers arrived")
        #expect(inOrder, "answers came out of request order")
        #expect(wrong == 0, "\(wrong) answers did not carry the device")
        await client.close()
    }

    /// Reads `expecting` answers (or until the socket stays silent for 5 s): how many came,
    /// whether their request IDs ran 1, 2, 3, …, and how many were not `device`'s record. The
    /// frames are parsed by hand as ServerFrame{request_id: 1, device: 5 {device_id: 1, …}},
    /// fields in number order as protobuf encoders write them; anything else counts as wrong.
    static func readAnswers(_ raw: RawConnection, expecting: Int, device: String) -> (Int, Bool, Int) {
        let deviceBytes = Array(device.utf8)
        var buffer = [UInt8]()
        var start = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var (count, inOrder, wrong) = (0, true, 0)
        func varint(_ bytes: [UInt8], _ index: inout Int) -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count, shift < 64 {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }
        while count < expecting {
            let received = chunk.withUnsafeMutableBytes { recv(raw.descriptor, $0.baseAddress, $0.count, 0) }
            if received <= 0 { break }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            buffer += chunk[0..<received]
            while buffer.count - start >= 4 {
                let length = Int(buffer[start]) << 24 | Int(buffer[start + 1]) << 16 | Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
                guard buffer.count - start - 4 >= length else { break }
                let end = start + 4 + length
                var index = start + 4
                start = end
                count += 1
                guard buffer[index] == 0x08 else {
                    wrong += 1
                    continue
                }
                index += 1
                guard let id = varint(buffer, &index), index < end, buffer[index] == 0x2A else {
                    wrong += 1
                    continue
                }
                if id != UInt64(count) { inOrder = false }
                index += 1
                guard varint(buffer, &index) != nil, index < end, buffer[index] == 0x0A else {
                    wrong += 1
                    continue
                }
                index += 1
                guard let idLength = varint(buffer, &index), index + Int(idLength) <= end,
                    buffer[index..<(index + Int(idLength))].elementsEqual(deviceBytes)
                else {
                    wrong += 1
                    continue
                }
            }
        }
        return (count, inOrder, wrong)
    }
}

extension Thread {
    /// Runs `body` on a thread of its own (it may block), its result awaited like a task's.
    static func detachedResult<T: Sendable>(_ body: @escaping @Sendable () -> T) -> Task<T, Never> {
        let box = Mutex<CheckedContinuation<T, Never>?>(nil)
        let result = Mutex<T?>(nil)
        Thread.detachNewThread {
            let value = body()
            let waiting = box.withLock { continuation -> CheckedContinuation<T, Never>? in
                result.withLock { $0 = value }
                return continuation
            }
            waiting?.resume(returning: value)
        }
        return Task {
            await withCheckedContinuation { continuation in
                let ready = box.withLock { stored -> T? in
                    if let value = result.withLock({ $0 }) { return value }
                    stored = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
