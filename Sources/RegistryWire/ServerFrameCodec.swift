import CProtobufC
import CRegistryProto
import NIOCore
import RegistryCore

extension ServerFrame {
    /// Decodes one frame payload; throws ``CodecError/malformed(message:bytes:)`` for bad bytes.
    public init(decoding payload: ByteBuffer) throws(CodecError) {
        // A watch stream's frames, the bulk of what a watcher reads, decode without protobuf-c.
        if let frame = payload.withUnsafeReadableBytes({ WatchEventsReader.frame($0) }) {
            self = frame
            return
        }
        self = try Self.decodedByProtobufC(payload)
    }

    /// `payload` decoded by protobuf-c, whatever its body.
    static func decodedByProtobufC(_ payload: ByteBuffer) throws(CodecError) -> ServerFrame {
        try ProtobufC.withUnpacked(payload, name: "registry.v1.ServerFrame", unpack: registry__v1__server_frame__unpack) {
            (frame: Registry__V1__ServerFrame) throws(CodecError) -> ServerFrame in
            ServerFrame(requestID: frame.request_id, body: try Self.body(of: frame), token: try CRead.causalToken(frame.token))
        }
    }

    private static func body(of frame: Registry__V1__ServerFrame) throws(CodecError) -> ServerBody {
        switch frame.body_case {
        case REGISTRY__V1__SERVER_FRAME__BODY_HELLO_ACCEPTED:
            guard let hello = frame.hello_accepted?.pointee else { return .unknown }
            let limits = hello.limits?.pointee
            return .helloAccepted(
                HelloAccepted(
                    version: CRead.version(hello.version), nodeID: CRead.string(hello.node_id),
                    clusterID: CRead.string(hello.cluster_id), serverVersion: CRead.string(hello.server_version),
                    limits: Limits(
                        maxFrameBytes: limits?.max_frame_bytes ?? 0, maxBatchSize: limits?.max_batch_size ?? 0,
                        maxInFlight: limits?.max_in_flight ?? 0, watchProgressMillis: limits?.watch_progress_millis ?? 0), instanceID: hello.instance_id, challenge: hello.challenge))
        case REGISTRY__V1__SERVER_FRAME__BODY_REGISTER_RESULT:
            guard let result = frame.register_result?.pointee else { return .unknown }
            return .registerResult(try registerResult(result))
        case REGISTRY__V1__SERVER_FRAME__BODY_REGISTER_BATCH_RESULT:
            guard let batch = frame.register_batch_result?.pointee else { return .unknown }
            return .registerBatchResult(
                try CRead.messages(batch.n_items, batch.items) { (item) throws(CodecError) -> BatchItem in
                    switch item.outcome_case {
                    case REGISTRY__V1__REGISTER_BATCH_ITEM__OUTCOME_RESULT:
                        guard let result = item.result?.pointee else { break }
                        return .result(try registerResult(result))
                    case REGISTRY__V1__REGISTER_BATCH_ITEM__OUTCOME_ERROR:
                        guard let error = item.error?.pointee else { break }
                        return .error(CRead.error(error))
                    default:
                        break
                    }
                    return .error(WireError(code: .unknownMessage, message: "batch item without outcome"))
                })
        case REGISTRY__V1__SERVER_FRAME__BODY_DEVICE:
            guard let device = frame.device?.pointee else { return .unknown }
            return .device(
                DeviceRecordMessage(
                    deviceID: CRead.string(device.device_id), vendor: CRead.string(device.vendor),
                    apps: try CRead.messages(device.n_apps, device.apps) {
                        AppSeenRecord(
                            bundleID: CRead.string($0.bundle_id), firstSeenMillis: $0.first_seen_ms,
                            lastSeenMillis: $0.last_seen_ms)
                    },
                    aliasIDs: CRead.strings(device.n_alias_ids, device.alias_ids), createdAtMillis: device.created_at_ms,
                    createdHLC: device.created_hlc, originNodeID: CRead.string(device.origin_node_id)))
        case REGISTRY__V1__SERVER_FRAME__BODY_STATS:
            guard let stats = frame.stats?.pointee else { return .unknown }
            var message = StatsMessage()
            message.nodeID = CRead.string(stats.node_id)
            message.clusterID = CRead.string(stats.cluster_id)
            message.serverVersion = CRead.string(stats.server_version)
            message.uptimeMillis = stats.uptime_ms
            message.deviceCount = stats.device_count
            message.aliasCount = stats.alias_count
            message.claimCount = stats.claim_count
            message.requestsServed = stats.requests_served
            // A zero count says nothing (the encoder leaves them out, and so a decoded answer
            // encodes back to itself).
            for (code, count) in try CRead.messages(stats.n_errors, stats.errors, { (Int32(truncatingIfNeeded: $0.code.rawValue), $0.count) })
            where count > 0 {
                message.errors[ErrorCode(rawValue: code), default: 0] &+= count
            }
            message.logOperations = stats.log_operations
            message.logEpoch = stats.log_epoch
            message.logSequence = stats.log_sequence
            message.connections = stats.connections
            message.logCommits = stats.log_commits
            message.journalBytes = stats.journal_bytes
            message.journalFiles = stats.journal_files
            message.snapshotOperations = stats.snapshot_operations
            message.snapshotAgeMillis = stats.snapshot_age_ms
            message.snapshotBytes = stats.snapshot_bytes
            message.stateDigest = stats.state_digest
            message.writeRefusal = CRead.string(stats.write_refusal)
            message.versionVector = try CRead.positions(stats.n_version_vector, stats.version_vector)
            message.peers = try CRead.messages(stats.n_peers, stats.peers) { (link) throws(CodecError) -> PeerLinkReport in
                PeerLinkReport(
                    address: CRead.string(link.address), nodeID: CRead.string(link.node_id), state: CRead.string(link.state),
                    backlogOperations: link.backlog_operations, inFlightBatches: link.in_flight_batches, lagMillis: link.lag_ms,
                    peerHolds: try CRead.positions(link.n_peer_holds, link.peer_holds), reconnects: link.reconnects,
                    lastError: CRead.string(link.last_error), sentOperations: link.sent_operations)
            }
            message.members = try CRead.messages(stats.n_members, stats.members) { member in
                ClusterMemberReport(nodeID: CRead.string(member.node_id), address: CRead.string(member.address), removed: member.removed != 0)
            }
            if let latency = stats.commit_latency?.pointee {
                message.commitLatency = try LatencyBuckets(
                    upperBoundsMicros: CRead.integers(latency.n_upper_bounds_us, latency.upper_bounds_us),
                    counts: CRead.integers(latency.n_counts, latency.counts))
            }
            return .stats(message)
        case REGISTRY__V1__SERVER_FRAME__BODY_SNAPSHOT_TAKEN:
            guard let taken = frame.snapshot_taken?.pointee else { return .unknown }
            return .snapshotTaken(
                SnapshotTaken(
                    operations: taken.operations, bytes: taken.bytes, durationMillis: taken.duration_ms,
                    journalFilesRemoved: taken.journal_files_removed))
        case REGISTRY__V1__SERVER_FRAME__BODY_MEMBER_REMOVED:
            guard let removed = frame.member_removed?.pointee else { return .unknown }
            return .memberRemoved(nodeID: CRead.string(removed.node_id))
        case REGISTRY__V1__SERVER_FRAME__BODY_BIND_RESULT:
            guard let result = frame.bind_result?.pointee else { return .unknown }
            return .bindResult(try AccountCodec.bindResult(result))
        case REGISTRY__V1__SERVER_FRAME__BODY_ACCOUNTS:
            guard let accounts = frame.accounts?.pointee else { return .unknown }
            return .accounts(try AccountCodec.accounts(accounts))
        case REGISTRY__V1__SERVER_FRAME__BODY_FORGET_RESULT:
            guard let result = frame.forget_result?.pointee else { return .unknown }
            return .forgetResult(ForgetCodec.forgetResult(result))
        case REGISTRY__V1__SERVER_FRAME__BODY_VENDOR_RULES:
            guard let rules = frame.vendor_rules?.pointee else { return .unknown }
            return .vendorRules(VendorCodec.rules(rules))
        case REGISTRY__V1__SERVER_FRAME__BODY_WATCH_EVENTS:
            guard let events = frame.watch_events?.pointee else { return .unknown }
            return .watchEvents(try WatchCodec.events(events))
        case REGISTRY__V1__SERVER_FRAME__BODY_CLONES:
            guard let clones = frame.clones?.pointee else { return .unknown }
            return .clones(try CloneCodec.clones(clones))
        case REGISTRY__V1__SERVER_FRAME__BODY_ERROR:
            guard let error = frame.error?.pointee else { return .unknown }
            return .error(CRead.error(error))
        default:
            return .unknown
        }
    }

    private static func registerResult(_ result: Registry__V1__RegisterResult) throws(CodecError) -> RegisterResult {
        // The device ID is kept as its UUID, without a String: a client reads it as one (a
        // batch's answer carries a hundred of them), and the text is made only if asked for.
        RegisterResult(
            deviceIDText: CRead.uuidText(result.device_id), created: result.created != 0, vendor: CRead.string(result.vendor),
            replacedDeviceIDs: CRead.strings(result.n_replaced_device_ids, result.replaced_device_ids),
            rejectedIdentifiers: try CRead.messages(result.n_rejected_identifiers, result.rejected_identifiers) {
                CRead.identifier($0)
            })
    }

    /// Appends this frame as protobuf bytes (no length prefix) to `buffer`. Answers to
    /// registrations are written directly (``RegisterResultsWriter``); the rest through protobuf-c.
    public func encode(into buffer: inout ByteBuffer) throws(CodecError) {
        if RegisterResultsWriter.write(requestID: requestID, body: body, token: token, into: &buffer) { return }
        try encodeThroughProtobufC(into: &buffer)
    }

    /// ``encode(into:)`` through protobuf-c's message graph and packing, for every body: what
    /// ``RegisterResultsWriter``'s bytes are checked against.
    func encodeThroughProtobufC(into buffer: inout ByteBuffer) throws(CodecError) {
        let arena = CArena()
        var frame = Registry__V1__ServerFrame()
        registry__v1__server_frame__init(&frame)
        frame.request_id = requestID
        frame.token = arena.causalToken(token)
        switch body {
        case .helloAccepted(let hello):
            var limits = Registry__V1__Limits()
            registry__v1__limits__init(&limits)
            limits.max_frame_bytes = hello.limits.maxFrameBytes
            limits.max_batch_size = hello.limits.maxBatchSize
            limits.max_in_flight = hello.limits.maxInFlight
            limits.watch_progress_millis = hello.limits.watchProgressMillis
            var message = Registry__V1__HelloAccepted()
            registry__v1__hello_accepted__init(&message)
            message.version = arena.version(hello.version)
            message.node_id = arena.string(hello.nodeID)
            message.cluster_id = arena.string(hello.clusterID)
            message.server_version = arena.string(hello.serverVersion)
            message.limits = arena.new(limits)
            message.instance_id = hello.instanceID
            message.challenge = hello.challenge
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_HELLO_ACCEPTED
            frame.hello_accepted = arena.new(message)
        case .registerResult(let result):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_REGISTER_RESULT
            frame.register_result = arena.registerResult(result)
        case .registerBatchResult(let items):
            let encoded = items.map { item -> UnsafeMutablePointer<Registry__V1__RegisterBatchItem>? in
                var message = Registry__V1__RegisterBatchItem()
                registry__v1__register_batch_item__init(&message)
                switch item {
                case .result(let result):
                    message.outcome_case = REGISTRY__V1__REGISTER_BATCH_ITEM__OUTCOME_RESULT
                    message.result = arena.registerResult(result)
                case .error(let error):
                    message.outcome_case = REGISTRY__V1__REGISTER_BATCH_ITEM__OUTCOME_ERROR
                    message.error = arena.error(error)
                }
                return arena.new(message)
            }
            var message = Registry__V1__RegisterBatchResult()
            registry__v1__register_batch_result__init(&message)
            message.n_items = encoded.count
            message.items = arena.array(encoded)
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_REGISTER_BATCH_RESULT
            frame.register_batch_result = arena.new(message)
        case .device(let device):
            let apps = device.apps.map { app -> UnsafeMutablePointer<Registry__V1__AppSeen>? in
                var message = Registry__V1__AppSeen()
                registry__v1__app_seen__init(&message)
                message.bundle_id = arena.string(app.bundleID)
                message.first_seen_ms = app.firstSeenMillis
                message.last_seen_ms = app.lastSeenMillis
                return arena.new(message)
            }
            var message = Registry__V1__DeviceRecord()
            registry__v1__device_record__init(&message)
            message.device_id = arena.string(device.deviceID)
            message.vendor = arena.string(device.vendor)
            message.n_apps = apps.count
            message.apps = arena.array(apps)
            (message.n_alias_ids, message.alias_ids) = arena.strings(device.aliasIDs)
            message.created_at_ms = device.createdAtMillis
            message.created_hlc = device.createdHLC
            message.origin_node_id = arena.string(device.originNodeID)
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_DEVICE
            frame.device = arena.new(message)
        case .stats(let stats):
            let errors = stats.errors.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map {
                entry -> UnsafeMutablePointer<Registry__V1__ErrorCount>? in
                var message = Registry__V1__ErrorCount()
                registry__v1__error_count__init(&message)
                message.code = Registry__V1__ErrorCode(rawValue: .init(truncatingIfNeeded: entry.key.rawValue))
                message.count = entry.value
                return arena.new(message)
            }
            var message = Registry__V1__Stats()
            registry__v1__stats__init(&message)
            message.node_id = arena.string(stats.nodeID)
            message.cluster_id = arena.string(stats.clusterID)
            message.server_version = arena.string(stats.serverVersion)
            message.uptime_ms = stats.uptimeMillis
            message.device_count = stats.deviceCount
            message.alias_count = stats.aliasCount
            message.claim_count = stats.claimCount
            message.requests_served = stats.requestsServed
            message.n_errors = errors.count
            message.errors = arena.array(errors)
            message.log_operations = stats.logOperations
            message.log_epoch = stats.logEpoch
            message.log_sequence = stats.logSequence
            message.connections = stats.connections
            message.log_commits = stats.logCommits
            message.journal_bytes = stats.journalBytes
            message.journal_files = stats.journalFiles
            message.snapshot_operations = stats.snapshotOperations
            message.snapshot_age_ms = stats.snapshotAgeMillis
            message.snapshot_bytes = stats.snapshotBytes
            message.state_digest = stats.stateDigest
            message.write_refusal = arena.string(stats.writeRefusal)
            (message.n_version_vector, message.version_vector) = arena.positions(stats.versionVector)
            message.n_peers = stats.peers.count
            message.peers = arena.array(count: stats.peers.count) { index in
                let report = stats.peers[index]
                var link = Registry__V1__PeerLinkStatus()
                registry__v1__peer_link_status__init(&link)
                link.address = arena.string(report.address)
                link.node_id = arena.string(report.nodeID)
                link.state = arena.string(report.state)
                link.backlog_operations = report.backlogOperations
                link.in_flight_batches = report.inFlightBatches
                link.lag_ms = report.lagMillis
                (link.n_peer_holds, link.peer_holds) = arena.positions(report.peerHolds)
                link.reconnects = report.reconnects
                link.last_error = arena.string(report.lastError)
                link.sent_operations = report.sentOperations
                return arena.new(link)
            }
            message.n_members = stats.members.count
            message.members = arena.array(count: stats.members.count) { index in
                var member = Registry__V1__ClusterMember()
                registry__v1__cluster_member__init(&member)
                member.node_id = arena.string(stats.members[index].nodeID)
                member.address = arena.string(stats.members[index].address)
                member.removed = stats.members[index].removed ? 1 : 0
                return arena.new(member)
            }
            var latency = Registry__V1__LatencyBuckets()
            registry__v1__latency_buckets__init(&latency)
            latency.n_upper_bounds_us = stats.commitLatency.upperBoundsMicros.count
            latency.upper_bounds_us = arena.array(stats.commitLatency.upperBoundsMicros)
            latency.n_counts = stats.commitLatency.counts.count
            latency.counts = arena.array(stats.commitLatency.counts)
            message.commit_latency = arena.new(latency)
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_STATS
            frame.stats = arena.new(message)
        case .snapshotTaken(let taken):
            var message = Registry__V1__SnapshotTaken()
            registry__v1__snapshot_taken__init(&message)
            message.operations = taken.operations
            message.bytes = taken.bytes
            message.duration_ms = taken.durationMillis
            message.journal_files_removed = taken.journalFilesRemoved
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_SNAPSHOT_TAKEN
            frame.snapshot_taken = arena.new(message)
        case .memberRemoved(let nodeID):
            var message = Registry__V1__MemberRemoved()
            registry__v1__member_removed__init(&message)
            message.node_id = arena.string(nodeID)
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_MEMBER_REMOVED
            frame.member_removed = arena.new(message)
        case .bindResult(let result):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_BIND_RESULT
            frame.bind_result = AccountCodec.bindResult(result, in: arena)
        case .accounts(let accounts):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_ACCOUNTS
            frame.accounts = AccountCodec.accounts(accounts, in: arena)
        case .forgetResult(let result):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_FORGET_RESULT
            frame.forget_result = ForgetCodec.forgetResult(result, in: arena)
        case .vendorRules(let rules):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_VENDOR_RULES
            frame.vendor_rules = VendorCodec.rules(rules, in: arena)
        case .watchEvents(let events):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_WATCH_EVENTS
            frame.watch_events = WatchCodec.events(events, in: arena)
        case .clones(let clones):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_CLONES
            frame.clones = CloneCodec.clones(clones, in: arena)
        case .error(let error):
            frame.body_case = REGISTRY__V1__SERVER_FRAME__BODY_ERROR
            frame.error = arena.error(error)
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
    func registerResult(_ result: RegisterResult) -> UnsafeMutablePointer<Registry__V1__RegisterResult>? {
        var message = Registry__V1__RegisterResult()
        registry__v1__register_result__init(&message)
        message.device_id = string(result.deviceIDText)
        message.created = result.created ? 1 : 0
        message.vendor = string(result.vendor)
        (message.n_replaced_device_ids, message.replaced_device_ids) = strings(result.replacedDeviceIDs)
        (message.n_rejected_identifiers, message.rejected_identifiers) = identifiers(result.rejectedIdentifiers)
        return new(message)
    }
}
