import RegistryCore
import RegistryWire

/// Everything a node decides with, as a plain value: the registry state, the clock, the log
/// position, and the rules. ``handle(_:wallMillis:generator:operations:)`` turns one request
/// into its response and the operations to log, with no I/O, so it is tested directly.
struct NodeState {
    var registry = RegistryState()
    var clock: HybridLogicalClock
    let nodeID: NodeID
    let epoch: UInt64
    /// The sequence number the next logged operation gets.
    var nextSequence: UInt64
    let rules: VendorRules
    let limits: Limits

    /// Answers `frame`, appending any state change to `operations`. Per-request errors become
    /// error responses; nothing here closes a connection.
    mutating func handle(
        _ frame: ClientFrame, wallMillis: UInt64, generator: inout some RandomNumberGenerator,
        operations: inout [LoggedOperation]
    ) -> ServerBody {
        switch frame.body {
        case .register(let request):
            switch register(request, wallMillis: wallMillis, generator: &generator, operations: &operations) {
            case .result(let result): return .registerResult(result)
            case .error(let error): return .error(error)
            }
        case .registerBatch(let requests):
            guard requests.count <= Int(limits.maxBatchSize) else {
                return .error(
                    WireError(
                        code: .batchTooLarge,
                        message: "batch of \(requests.count) registrations exceeds the limit of \(limits.maxBatchSize)"))
            }
            return .registerBatchResult(
                requests.map { register($0, wallMillis: wallMillis, generator: &generator, operations: &operations) })
        case .resolve(let text):
            do {
                let id = try DeviceID(parsing: text)
                guard let record = registry.resolve(id) else {
                    return .error(WireError(code: .notFound, message: "no device \(id)"))
                }
                return .device(DeviceRecordMessage(record))
            } catch {
                return .error(WireError(error))
            }
        case .lookup(let request):
            return lookup(request)
        case .hello, .stats, .unknown:
            // The connection handles the handshake and stats; an unknown body is refused here.
            return .error(WireError(code: .unknownMessage, message: "request \(frame.requestID) has no body this node knows"))
        }
    }

    private mutating func register(
        _ request: RegisterRequest, wallMillis: UInt64, generator: inout some RandomNumberGenerator,
        operations: inout [LoggedOperation]
    ) -> BatchItem {
        let registration: Registration
        do {
            registration = try Registration(bundle: request.bundleID, identifiers: request.identifiers, rules: rules)
        } catch {
            return .error(WireError(error))
        }
        let now = clock.tick(wallMillis: wallMillis)
        let (op, outcome) = registry.register(registration, at: now, origin: nodeID) {
            DeviceID.mint(at: now, using: &generator)
        }
        operations.append(
            LoggedOperation(origin: nodeID, epoch: epoch, sequence: nextSequence, timestamp: now, operation: .registration(op)))
        nextSequence += 1
        return .result(
            RegisterResult(
                deviceID: outcome.device.description, created: outcome.created, vendor: outcome.vendor.name,
                replacedDeviceIDs: outcome.replaced.map(\.description), rejectedIdentifiers: outcome.rejected))
    }

    private func lookup(_ request: LookupRequest) -> ServerBody {
        do throws(IdentityError) {
            let vendor: Vendor
            switch request.scope {
            case .bundle(let text): vendor = rules.vendor(of: try BundleID(parsing: text))
            case .vendor(let name): vendor = try rules.vendor(named: name)
            case .unspecified:
                return .error(WireError(code: .invalidArgument, message: "a lookup needs a bundle_id or a vendor"))
            }
            guard let presented = request.identifier else { throw IdentityError.missingIdentifier }
            let identifier = try Identifier(rawKind: presented.rawKind, text: presented.text)
            guard let record = registry.lookup(vendor: vendor, identifier: identifier) else {
                return .error(WireError(code: .notFound, message: "no device claims \(identifier) in vendor \(vendor)"))
            }
            return .device(DeviceRecordMessage(record))
        } catch {
            return .error(WireError(error))
        }
    }
}
