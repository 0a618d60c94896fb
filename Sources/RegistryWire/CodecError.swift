/// Why bytes could not become a message, or a message could not become bytes.
public enum CodecError: Error, Equatable, Sendable, CustomStringConvertible {
    /// protobuf-c refused the bytes (truncated field, wrong wire type, bad length, ...).
    case malformed(message: String, bytes: Int)
    /// protobuf-c packed a different number of bytes than it promised; a bug, never sent.
    case packSizeMismatch(expected: Int, written: Int)
    /// A log operation decoded as protobuf but breaks the identity rules.
    case invalidOperation(String)
    /// A message decoded as protobuf but a field breaks the contract (named in the text).
    case invalidField(String)

    public var description: String {
        switch self {
        case .malformed(let message, let bytes): return "\(bytes) bytes are not a valid \(message)"
        case .packSizeMismatch(let expected, let written):
            return "protobuf-c packed \(written) bytes where it sized \(expected)"
        case .invalidOperation(let reason): return "invalid log operation: \(reason)"
        case .invalidField(let reason): return "invalid field: \(reason)"
        }
    }
}
