import NIOCore
import RegistryCore

/// Writes a `ServerFrame` that answers registrations (`RegisterResult`, `RegisterBatchResult`)
/// directly (``ProtobufWriter``), the bytes protobuf-c packs, field for field
/// (`RegisterResultsWriterTests` compares them over seeded random answers). Every registration
/// is answered: through protobuf-c a single request's answer cost three allocations (the arena's
/// block, the device ID's text, the message graph) and two walks of that graph, one to size it and
/// one to pack it (docs/performance.md, "Allocations a registration makes").
enum RegisterResultsWriter {
    /// Appends the frame of `body` (a `registerResult` or a `registerBatchResult`; no length
    /// prefix) to `buffer` and returns true; or returns false, leaving `buffer` as it was, for any
    /// other body and for text holding a NUL byte, which a protobuf-c string cannot carry: the
    /// caller then goes through protobuf-c, which refuses that text.
    static func write(requestID: UInt64, body: ServerBody, token: CausalToken, into buffer: inout ByteBuffer) -> Bool {
        let field: UInt64
        let bodyBytes: Int
        switch body {
        case .registerResult(let result):
            guard !holdsNUL(result) else { return false }
            (field, bodyBytes) = (Field.registerResult, size(result))
        case .registerBatchResult(let items):
            for item in items {
                switch item {
                case .result(let result): guard !holdsNUL(result) else { return false }
                case .error(let error): guard !error.message.containsNUL else { return false }
                }
            }
            (field, bodyBytes) = (Field.registerBatchResult, size(items))
        default:
            return false
        }
        guard !token.positions.contains(where: { $0.origin.containsNUL }) else { return false }
        let tokenBytes = size(token)
        let frameBytes = ProtobufWriter.uint64Size(Field.requestID, requestID) + ProtobufWriter.delimitedSize(field, length: bodyBytes)
            + (token.isEmpty ? 0 : ProtobufWriter.delimitedSize(Field.token, length: tokenBytes))
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: frameBytes) { out in
            let start = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var writer = ProtobufWriter(at: start)
            writer.uint64(Field.requestID, requestID)
            writer.header(field, length: bodyBytes)
            switch body {
            case .registerResult(let result): write(result, with: &writer)
            case .registerBatchResult(let items): write(items, with: &writer)
            default: preconditionFailure("only registration answers are written here")
            }
            if !token.isEmpty {
                writer.header(Field.token, length: tokenBytes)
                write(token, with: &writer)
            }
            precondition(writer.cursor == start + frameBytes, "a registration answer's size was misjudged")
            return frameBytes
        }
        return true
    }

    private static func holdsNUL(_ result: RegisterResult) -> Bool {
        result.deviceIDText.containsNUL || result.vendor.containsNUL || result.replacedDeviceIDs.contains(where: \.containsNUL)
            || result.rejectedIdentifiers.contains(where: \.value.containsNUL)
    }

    // MARK: - Sizes, each mirroring the write below it

    private static func size(_ result: RegisterResult) -> Int {
        var bytes = ProtobufWriter.stringSize(Field.deviceID, result.deviceIDText) + ProtobufWriter.uint64Size(Field.created, result.created ? 1 : 0)
            + ProtobufWriter.stringSize(Field.vendor, result.vendor)
        for replaced in result.replacedDeviceIDs { bytes += ProtobufWriter.elementSize(Field.replaced, replaced) }
        for identifier in result.rejectedIdentifiers { bytes += ProtobufWriter.delimitedSize(Field.rejected, length: size(identifier)) }
        return bytes
    }

    private static func write(_ result: RegisterResult, with writer: inout ProtobufWriter) {
        writer.string(Field.deviceID, result.deviceIDText)
        writer.uint64(Field.created, result.created ? 1 : 0)
        writer.string(Field.vendor, result.vendor)
        for replaced in result.replacedDeviceIDs { writer.element(Field.replaced, replaced) }
        for identifier in result.rejectedIdentifiers {
            writer.header(Field.rejected, length: size(identifier))
            writer.int32(Field.identifierKind, identifier.rawKind)
            writer.string(Field.identifierValue, identifier.value)
        }
    }

    private static func size(_ identifier: PresentedIdentifier) -> Int {
        ProtobufWriter.int32Size(Field.identifierKind, identifier.rawKind) + ProtobufWriter.stringSize(Field.identifierValue, identifier.value)
    }

    private static func size(_ items: [BatchItem]) -> Int {
        items.reduce(0) { $0 + ProtobufWriter.delimitedSize(Field.items, length: size($1)) }
    }

    private static func write(_ items: [BatchItem], with writer: inout ProtobufWriter) {
        for item in items {
            // Each item's body is sized once here: its header and its item's header both need it.
            switch item {
            case .result(let result):
                let resultBytes = size(result)
                writer.header(Field.items, length: ProtobufWriter.delimitedSize(Field.itemResult, length: resultBytes))
                writer.header(Field.itemResult, length: resultBytes)
                write(result, with: &writer)
            case .error(let error):
                let errorBytes = size(error)
                writer.header(Field.items, length: ProtobufWriter.delimitedSize(Field.itemError, length: errorBytes))
                writer.header(Field.itemError, length: errorBytes)
                writer.int32(Field.errorCode, error.code.rawValue)
                writer.string(Field.errorMessage, error.message)
                writer.uint64(Field.errorRetryable, error.retryable ? 1 : 0)
            }
        }
    }

    private static func size(_ item: BatchItem) -> Int {
        switch item {
        case .result(let result): ProtobufWriter.delimitedSize(Field.itemResult, length: size(result))
        case .error(let error): ProtobufWriter.delimitedSize(Field.itemError, length: size(error))
        }
    }

    private static func size(_ error: WireError) -> Int {
        ProtobufWriter.int32Size(Field.errorCode, error.code.rawValue) + ProtobufWriter.stringSize(Field.errorMessage, error.message)
            + ProtobufWriter.uint64Size(Field.errorRetryable, error.retryable ? 1 : 0)
    }

    private static func size(_ token: CausalToken) -> Int {
        token.positions.reduce(0) { $0 + ProtobufWriter.delimitedSize(Field.positions, length: size($1)) }
    }

    private static func write(_ token: CausalToken, with writer: inout ProtobufWriter) {
        for position in token.positions {
            writer.header(Field.positions, length: size(position))
            writer.string(Field.positionOrigin, position.origin)
            writer.uint64(Field.positionEpoch, position.epoch)
            writer.uint64(Field.positionSequence, position.sequence)
        }
    }

    private static func size(_ position: LogPosition) -> Int {
        ProtobufWriter.stringSize(Field.positionOrigin, position.origin) + ProtobufWriter.uint64Size(Field.positionEpoch, position.epoch)
            + ProtobufWriter.uint64Size(Field.positionSequence, position.sequence)
    }

    /// Field numbers, from `Protos/registry/v1` (envelope.proto, device.proto, common.proto, admin.proto).
    private enum Field {
        /// `ServerFrame`.
        static let requestID: UInt64 = 1, registerResult: UInt64 = 3, registerBatchResult: UInt64 = 4, token: UInt64 = 16
        /// `RegisterResult`.
        static let deviceID: UInt64 = 1, created: UInt64 = 2, vendor: UInt64 = 3, replaced: UInt64 = 4, rejected: UInt64 = 5
        /// `Identifier`.
        static let identifierKind: UInt64 = 1, identifierValue: UInt64 = 2
        /// `RegisterBatchResult` and `RegisterBatchItem`.
        static let items: UInt64 = 1, itemResult: UInt64 = 1, itemError: UInt64 = 2
        /// `Error`.
        static let errorCode: UInt64 = 1, errorMessage: UInt64 = 2, errorRetryable: UInt64 = 3
        /// `CausalToken` and `LogPosition`.
        static let positions: UInt64 = 1, positionOrigin: UInt64 = 1, positionEpoch: UInt64 = 2, positionSequence: UInt64 = 3
    }
}
