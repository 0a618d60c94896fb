import NIOCore
import RegistryCore
import RegistryStorage
import RegistryWire

/// What each libFuzzer target (`Fuzz/`, `make fuzz`) does with one input, kept here so that the
/// test suite can run the same bodies over its seed inputs. Each must return without crashing
/// whatever the bytes: a malformed input is a typed error, never a trap. A message that decodes
/// and encodes again must decode to the same value. (Encoding may refuse, typed, what decoding
/// keeps so that a field's rule can refuse it: a string holding a NUL.)
public enum FuzzBodies {
    /// The length-prefixed frame decoder, cutting frames from the bytes as they arrive.
    public static func frameDecoder(_ bytes: UnsafeRawBufferPointer) {
        var buffer = ByteBuffer(bytes: bytes)
        let decoder = FrameDecoder(maxFrameBytes: 1 << 16)
        while true {
            do {
                guard let frame = try decoder.nextFrame(&buffer) else { return }
                _ = frame.readableBytes
            } catch {
                return
            }
        }
    }

    /// The client-frame codec (requests), and the server-frame codec (answers), both ways.
    public static func clientFrames(_ bytes: UnsafeRawBufferPointer) {
        let payload = ByteBuffer(bytes: bytes)
        if let frame = try? ClientFrame(decoding: payload) {
            var out = ByteBuffer()
            if (try? frame.encode(into: &out)) != nil { precondition(try! ClientFrame(decoding: out) == frame, "\(frame) changed") }
        }
        if let frame = try? ServerFrame(decoding: payload) {
            var out = ByteBuffer()
            if (try? frame.encode(into: &out)) != nil { precondition(try! ServerFrame(decoding: out) == frame, "\(frame) changed") }
        }
    }

    /// The peer-frame codec, and the operations a batch carries; a batch the direct reader
    /// (``OperationDecoder/batch(inFrame:limit:)``) reads must be what protobuf-c's path gives.
    public static func peerFrames(_ bytes: UnsafeRawBufferPointer) {
        var decoder = OperationDecoder()
        let direct = decoder.batch(inFrame: bytes, limit: .max)
        guard let frame = try? PeerFrame(decoding: ByteBuffer(bytes: bytes)) else {
            precondition(direct == nil, "the direct reader read a frame protobuf-c refuses")
            return
        }
        if case .batch(let batch) = frame {
            let decoded = batch.operations.map { try? $0.decoded() }
            if let direct {
                precondition(direct.batchID == batch.batchID && direct.operations.map { Optional($0) } == decoded, "the direct reader read \(direct), protobuf-c \(batch)")
                // The bytes each keeps, which the journal writes, are the same too.
                let directBytes = direct.operations.map { $0.encoded.map { Array($0) } }
                precondition(directBytes == decoded.map { $0.flatMap { $0.encoded.map { Array($0) } } }, "the two keep different bytes of \(batch)")
            }
        } else {
            precondition(direct == nil, "the direct reader read a batch where protobuf-c found \(frame)")
        }
        var out = ByteBuffer()
        if (try? frame.encode(into: &out)) != nil { precondition(try! PeerFrame(decoding: out) == frame, "\(frame) changed") }
    }

    /// The snapshot reader: the first byte chooses between the file format (header, blocks,
    /// checksums, trailer, on a simulated disk) and the codecs of what a checked file holds
    /// (its metadata and its records).
    public static func snapshot(_ bytes: UnsafeRawBufferPointer) {
        guard let mode = bytes.first else { return }
        let rest = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
        switch mode % 3 {
        case 0:
            let fs = SimulatedFileSystem()
            guard let file = try? fs.open("/snapshot", create: true), (try? fs.write(file, rest, at: 0)) != nil else { return }
            fs.close(file)
            // What start-up does with a file whose checksums pass: decode, then rebuild the state,
            // which refuses records that contradict each other.
            var restorer: RegistryState.Restorer? = RegistryState.Restorer()
            try? SnapshotFile.read(
                "/snapshot", on: fs, metadata: { meta throws(StorageError) in _ = try? SnapshotCodec.decodeMetadata(meta) },
                record: { record throws(StorageError) in
                    guard let decoded = try? SnapshotCodec.decodeRecord(record) else { return }
                    if (try? restorer?.add(decoded)) == nil { restorer = nil }
                })
            _ = try? restorer?.finish()
        case 1:
            _ = try? SnapshotCodec.decodeMetadata(Array(rest))
        default:
            _ = try? SnapshotCodec.decodeRecord(rest)
        }
    }
}
