import CProtobufC
import CRegistryProto
import RegistryCore

/// Conversions for messages both directions share (identifiers, errors, versions).
extension CArena {
    func identifier(_ value: PresentedIdentifier) -> UnsafeMutablePointer<Registry__V1__Identifier>? {
        var message = Registry__V1__Identifier()
        registry__v1__identifier__init(&message)
        message.kind = Registry__V1__IdentifierKind(rawValue: .init(truncatingIfNeeded: value.rawKind))
        message.value = string(value.value)
        return new(message)
    }

    func identifiers(_ values: [PresentedIdentifier]) -> (Int, UnsafeMutablePointer<UnsafeMutablePointer<Registry__V1__Identifier>?>?) {
        (values.count, array(count: values.count) { identifier(values[$0]) })
    }

    func error(_ value: WireError) -> UnsafeMutablePointer<Registry__V1__Error>? {
        var message = Registry__V1__Error()
        registry__v1__error__init(&message)
        message.code = Registry__V1__ErrorCode(rawValue: .init(truncatingIfNeeded: value.code.rawValue))
        message.message = string(value.message)
        message.retryable = value.retryable ? 1 : 0
        return new(message)
    }

    func version(_ value: ProtocolVersion) -> UnsafeMutablePointer<Registry__V1__ProtocolVersion>? {
        var message = Registry__V1__ProtocolVersion()
        registry__v1__protocol_version__init(&message)
        message.major = value.major
        message.minor = value.minor
        return new(message)
    }

    func positions(_ values: [LogPosition]) -> (Int, UnsafeMutablePointer<UnsafeMutablePointer<Registry__V1__LogPosition>?>?) {
        (
            values.count,
            array(count: values.count) { index in
                var position = Registry__V1__LogPosition()
                registry__v1__log_position__init(&position)
                position.origin = string(values[index].origin)
                position.epoch = values[index].epoch
                position.sequence = values[index].sequence
                return new(position)
            }
        )
    }

    func strings(_ values: [String]) -> (Int, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) {
        (values.count, array(count: values.count) { Optional(string(values[$0])) })
    }
}

extension CRead {
    static func identifier(_ message: Registry__V1__Identifier) -> PresentedIdentifier {
        PresentedIdentifier(rawKind: Int32(truncatingIfNeeded: message.kind.rawValue), value: uuidText(message.value))
    }

    static func positions(
        _ count: Int, _ items: UnsafeMutablePointer<UnsafeMutablePointer<Registry__V1__LogPosition>?>?
    ) throws(CodecError) -> [LogPosition] {
        try messages(count, items) { LogPosition(origin: string($0.origin), epoch: $0.epoch, sequence: $0.sequence) }
    }

    static func error(_ message: Registry__V1__Error) -> WireError {
        WireError(
            code: ErrorCode(rawValue: Int32(truncatingIfNeeded: message.code.rawValue)), message: string(message.message),
            retryable: message.retryable != 0)
    }

    static func version(_ message: UnsafeMutablePointer<Registry__V1__ProtocolVersion>?) -> ProtocolVersion {
        guard let message else { return ProtocolVersion(major: 0, minor: 0) }
        return ProtocolVersion(major: message.pointee.major, minor: message.pointee.minor)
    }
}
