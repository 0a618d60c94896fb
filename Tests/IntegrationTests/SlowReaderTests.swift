import Foundation
import NIOCore
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A client that pipelines requests and never reads its answers must not be able to take the
/// node's memory: the node stops reading from it, TCP pushes back, and everyone else is served.
@Suite(.serialized, .timeLimit(.minutes(3))) struct SlowReaderTests {
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

        // One million resolves of that device, pipelined, each in a frame of its own.
        var wire = ByteBuffer()
        for id in 1...UInt64(Self.requests) {
            try ClientFrame(requestID: id, body: .resolve(deviceID: device)).encodeFrame(into: &wire)
        }
        let bytes = Array(wire.readableBytesView)
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
    /// whether their request IDs ran 1, 2, 3, …, and how many were not `device`'s record.
    static func readAnswers(_ raw: RawConnection, expecting: Int, device: String) -> (Int, Bool, Int) {
        var buffer = ByteBuffer()
        let decoder = FrameDecoder(maxFrameBytes: 1 << 20)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var (count, inOrder, wrong) = (0, true, 0)
        while count < expecting {
            let received = chunk.withUnsafeMutableBytes { recv(raw.descriptor, $0.baseAddress, $0.count, 0) }
            if received <= 0 { break }
            buffer.writeBytes(chunk[0..<received])
            while let payload = try? decoder.nextFrame(&buffer) {
                count += 1
                guard let frame = try? ServerFrame(decoding: payload) else {
                    wrong += 1
                    continue
                }
                if frame.requestID != UInt64(count) { inOrder = false }
                if case .device(let record) = frame.body, record.deviceID == device {} else { wrong += 1 }
            }
            buffer.discardReadBytes()
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
