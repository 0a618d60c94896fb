import CProtobufC
import CRegistryProto
import NIOCore
import RegistryCore

extension ClientFrame {
    /// Decodes one frame payload. Throws ``CodecError/malformed(message:bytes:)`` when the
    /// bytes are not a ClientFrame; an unknown or missing body decodes as `.unknown`.
    public init(decoding payload: ByteBuffer) throws(CodecError) {
        // Registrations, nearly every frame a node reads, decode without protobuf-c.
        if let frame = payload.withUnsafeReadableBytes({ RegisterRequestsReader.frame($0) }) {
            self = frame
            return
        }
        self = try Self.decodedByProtobufC(payload)
    }

    /// `payload` decoded by protobuf-c, whatever its body.
    static func decodedByProtobufC(_ payload: ByteBuffer) throws(CodecError) -> ClientFrame {
        try ProtobufC.withUnpacked(payload, name: "registry.v1.ClientFrame", unpack: registry__v1__client_frame__unpack) {
            (frame: Registry__V1__ClientFrame) throws(CodecError) -> ClientFrame in
            ClientFrame(
                requestID: frame.request_id, body: try Self.body(of: frame), ackReplicas: frame.write_concern?.pointee.ack_replicas,
                after: try CRead.causalToken(frame.after))
        }
    }

    private static func body(of frame: Registry__V1__ClientFrame) throws(CodecError) -> ClientBody {
        switch frame.body_case {
        case REGISTRY__V1__CLIENT_FRAME__BODY_HELLO:
            guard let hello = frame.hello?.pointee else { return .unknown }
            return .hello(
                Hello(
                    version: CRead.version(hello.version), role: Role(rawValue: Int32(truncatingIfNeeded: hello.role.rawValue)),
                    clientName: CRead.string(hello.client_name), token: CRead.string(hello.token)))
        case REGISTRY__V1__CLIENT_FRAME__BODY_REGISTER_DEVICE:
            guard let request = frame.register_device?.pointee else { return .unknown }
            return .register(registerRequest(request))
        case REGISTRY__V1__CLIENT_FRAME__BODY_REGISTER_BATCH:
            guard let batch = frame.register_batch?.pointee else { return .unknown }
            return .registerBatch(try CRead.messages(batch.n_registrations, batch.registrations) { registerRequest($0) })
        case REGISTRY__V1__CLIENT_FRAME__BODY_RESOLVE_DEVICE:
            guard let request = frame.resolve_device?.pointee else { return .unknown }
            return .resolve(deviceID: CRead.string(request.device_id))
        case REGISTRY__V1__CLIENT_FRAME__BODY_LOOKUP_DEVICE:
            guard let request = frame.lookup_device?.pointee else { return .unknown }
            let scope: LookupRequest.Scope
            switch request.scope_case {
            case REGISTRY__V1__LOOKUP_REQUEST__SCOPE_BUNDLE_ID: scope = .bundle(CRead.string(request.bundle_id))
            case REGISTRY__V1__LOOKUP_REQUEST__SCOPE_VENDOR: scope = .vendor(CRead.string(request.vendor))
            default: scope = .unspecified
            }
            return .lookup(LookupRequest(scope: scope, identifier: request.identifier.map { CRead.identifier($0.pointee) }))
        case REGISTRY__V1__CLIENT_FRAME__BODY_STATS:
            return .stats
        case REGISTRY__V1__CLIENT_FRAME__BODY_SNAPSHOT:
            return .snapshot
        case REGISTRY__V1__CLIENT_FRAME__BODY_REMOVE_MEMBER:
            guard let request = frame.remove_member?.pointee else { return .unknown }
            return .removeMember(nodeID: CRead.string(request.node_id), force: request.force != 0)
        case REGISTRY__V1__CLIENT_FRAME__BODY_BIND:
            guard let request = frame.bind?.pointee else { return .unknown }
            return .bind(AccountCodec.bindRequest(request))
        case REGISTRY__V1__CLIENT_FRAME__BODY_UNBIND:
            guard let request = frame.unbind?.pointee else { return .unknown }
            return .unbind(AccountCodec.unbindRequest(request))
        case REGISTRY__V1__CLIENT_FRAME__BODY_ACCOUNT:
            guard let request = frame.account?.pointee else { return .unknown }
            return .account(AccountCodec.accountQuery(request))
        case REGISTRY__V1__CLIENT_FRAME__BODY_FORGET:
            guard let request = frame.forget?.pointee else { return .unknown }
            return .forget(deviceID: CRead.string(request.device_id))
        case REGISTRY__V1__CLIENT_FRAME__BODY_VENDOR:
            guard let request = frame.vendor?.pointee else { return .unknown }
            return .vendor(VendorCodec.request(request))
        case REGISTRY__V1__CLIENT_FRAME__BODY_WATCH:
            guard let request = frame.watch?.pointee else { return .unknown }
            return .watch(try WatchCodec.request(request))
        case REGISTRY__V1__CLIENT_FRAME__BODY_CLONES:
            guard let request = frame.clones?.pointee else { return .unknown }
            return .clones(vendor: CRead.string(request.vendor))
        default:
            return .unknown
        }
    }

    private static func registerRequest(_ request: Registry__V1__RegisterRequest) -> RegisterRequest {
        let identifiers = (try? CRead.messages(request.n_identifiers, request.identifiers) { CRead.identifier($0) }) ?? []
        return RegisterRequest(bundleID: CRead.string(request.bundle_id), identifiers: identifiers)
    }

    /// Appends this frame as protobuf bytes (no length prefix) to `buffer`.
    public func encode(into buffer: inout ByteBuffer) throws(CodecError) {
        let arena = CArena()
        var frame = Registry__V1__ClientFrame()
        registry__v1__client_frame__init(&frame)
        frame.request_id = requestID
        if let ackReplicas {
            var concern = Registry__V1__WriteConcern()
            registry__v1__write_concern__init(&concern)
            concern.ack_replicas = ackReplicas
            frame.write_concern = arena.new(concern)
        }
        frame.after = arena.causalToken(after)
        switch body {
        case .hello(let hello):
            var message = Registry__V1__Hello()
            registry__v1__hello__init(&message)
            message.version = arena.version(hello.version)
            message.role = Registry__V1__Role(rawValue: .init(truncatingIfNeeded: hello.role.rawValue))
            message.client_name = arena.string(hello.clientName)
            message.token = arena.string(hello.token)
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_HELLO
            frame.hello = arena.new(message)
        case .register(let request):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_REGISTER_DEVICE
            frame.register_device = arena.registerRequest(request)
        case .registerBatch(let requests):
            var message = Registry__V1__RegisterBatchRequest()
            registry__v1__register_batch_request__init(&message)
            message.n_registrations = requests.count
            message.registrations = arena.array(requests.map { arena.registerRequest($0) })
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_REGISTER_BATCH
            frame.register_batch = arena.new(message)
        case .resolve(let deviceID):
            var message = Registry__V1__ResolveRequest()
            registry__v1__resolve_request__init(&message)
            message.device_id = arena.string(deviceID)
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_RESOLVE_DEVICE
            frame.resolve_device = arena.new(message)
        case .lookup(let request):
            var message = Registry__V1__LookupRequest()
            registry__v1__lookup_request__init(&message)
            switch request.scope {
            case .bundle(let bundle):
                message.scope_case = REGISTRY__V1__LOOKUP_REQUEST__SCOPE_BUNDLE_ID
                message.bundle_id = arena.string(bundle)
            case .vendor(let vendor):
                message.scope_case = REGISTRY__V1__LOOKUP_REQUEST__SCOPE_VENDOR
                message.vendor = arena.string(vendor)
            case .unspecified:
                break
            }
            message.identifier = request.identifier.flatMap { arena.identifier($0) }
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_LOOKUP_DEVICE
            frame.lookup_device = arena.new(message)
        case .stats:
            var message = Registry__V1__StatsRequest()
            registry__v1__stats_request__init(&message)
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_STATS
            frame.stats = arena.new(message)
        case .snapshot:
            var message = Registry__V1__SnapshotRequest()
            registry__v1__snapshot_request__init(&message)
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_SNAPSHOT
            frame.snapshot = arena.new(message)
        case .removeMember(let nodeID, let force):
            var message = Registry__V1__RemoveMemberRequest()
            registry__v1__remove_member_request__init(&message)
            message.node_id = arena.string(nodeID)
            message.force = force ? 1 : 0
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_REMOVE_MEMBER
            frame.remove_member = arena.new(message)
        case .bind(let request):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_BIND
            frame.bind = AccountCodec.bindRequest(request, in: arena)
        case .unbind(let request):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_UNBIND
            frame.unbind = AccountCodec.unbindRequest(request, in: arena)
        case .account(let query):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_ACCOUNT
            frame.account = AccountCodec.accountRequest(query, in: arena)
        case .forget(let deviceID):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_FORGET
            frame.forget = ForgetCodec.forgetRequest(deviceID, in: arena)
        case .vendor(let request):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_VENDOR
            frame.vendor = VendorCodec.request(request, in: arena)
        case .watch(let request):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_WATCH
            frame.watch = WatchCodec.request(request, in: arena)
        case .clones(let vendor):
            frame.body_case = REGISTRY__V1__CLIENT_FRAME__BODY_CLONES
            frame.clones = CloneCodec.request(vendor, in: arena)
        case .unknown:
            break
        }
        try arena.refuseTextWithNUL()
        try withExtendedLifetime(arena) { () throws(CodecError) in
            try ProtobufC.pack(&frame, into: &buffer)
        }
    }
}

extension CArena {
    func registerRequest(_ request: RegisterRequest) -> UnsafeMutablePointer<Registry__V1__RegisterRequest>? {
        var message = Registry__V1__RegisterRequest()
        registry__v1__register_request__init(&message)
        message.bundle_id = string(request.bundleID)
        (message.n_identifiers, message.identifiers) = identifiers(request.identifiers)
        return new(message)
    }
}
