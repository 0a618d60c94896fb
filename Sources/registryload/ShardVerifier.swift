import NIOCore
import RegistryClient
import RegistryCore
import LoadGeneration
import RegistryWire

/// What verification found on one shard.
struct VerificationOutcome: Sendable {
    var lookups: UInt64 = 0
    /// Identifiers an endpoint does not know although their registration was acknowledged.
    var lost: UInt64 = 0
    /// Identifiers that resolve to an ID other than the acknowledged one, or to different IDs
    /// on different endpoints or for different identifiers of one device.
    var mismatched: UInt64 = 0
    /// Lookups that failed for another reason (transport, server error).
    var failedLookups: UInt64 = 0
    /// Model devices with any problem, to check again while a cluster converges.
    var failingDevices: [Int] = []
}

/// Runs the lookups of `--verify` for one shard, pipelined over its lanes: for each device,
/// each identifier it ever presented, on each endpoint, scoped by vendor.
///
/// Lives on the shard's loop only (created and called there), like the shard itself.
final class ShardVerifier {
    private let shard: LoadShard
    private let devices: [Int]
    private let endpoints: Int
    private let promise: EventLoopPromise<VerificationOutcome>
    private var outcome = VerificationOutcome()
    private var nextDevice = 0
    private var inFlight = 0
    private var laneCursor: [Int]
    private let endpointLanes: [[Int]]
    /// Per device being checked: lookups outstanding, the first ID seen, whether anything failed.
    private var pending: [Int: (left: Int, first: UUID128?, failed: Bool)] = [:]

    init(shard: LoadShard, devices: [Int], endpoints: Int, promise: EventLoopPromise<VerificationOutcome>) {
        self.shard = shard
        self.devices = devices
        self.endpoints = endpoints
        self.promise = promise
        self.endpointLanes = (0..<endpoints).map { shard.lanes(to: $0) }
        self.laneCursor = Array(repeating: 0, count: endpoints)
    }

    func start() {
        fill()
        if inFlight == 0 { promise.succeed(outcome) }
    }

    private func fill() {
        let limit = shard.lanes.count * shard.plan.inFlight
        while inFlight < limit, nextDevice < devices.count {
            check(devices[nextDevice])
            nextDevice += 1
        }
    }

    private func check(_ index: Int) {
        let device = shard.workload.devices[index]
        let claims = device.claims
        let vendor = shard.plan.catalogue.vendorName(device.vendor)
        pending[index] = (claims.count * endpoints, nil, false)
        for endpoint in 0..<endpoints {
            let lanes = endpointLanes[endpoint]
            guard !lanes.isEmpty else {
                // This shard has no connection to the endpoint; another shard's lanes do not
                // serve it, so say so rather than skip it silently.
                outcome.failedLookups += UInt64(claims.count)
                pending[index]!.left -= claims.count
                pending[index]!.failed = true
                continue
            }
            for claim in claims {
                let lane = lanes[laneCursor[endpoint] % lanes.count]
                laneCursor[endpoint] += 1
                inFlight += 1
                outcome.lookups += 1
                let request = LookupRequest(
                    scope: .vendor(vendor), identifier: PresentedIdentifier(rawKind: claim.kind.rawValue, text: claim.value.text))
                shard.send(.lookup(request), on: lane) { result in self.answered(index, device: device, result: result.map(\.body)) }
            }
        }
        finishDeviceIfDone(index)
    }

    private func answered(_ index: Int, device: ModelDevice, result: Result<ServerBody, RegistryClientError>) {
        inFlight -= 1
        var entry = pending[index]!
        entry.left -= 1
        switch result {
        case .success(.device(let record)):
            if let id = UUID128(text: record.deviceID), device.accepts(id), entry.first == nil || entry.first == id {
                entry.first = id
            } else {
                outcome.mismatched += 1
                entry.failed = true
            }
        case .success(.error(let error)) where error.code == .notFound:
            outcome.lost += 1
            entry.failed = true
        default:
            outcome.failedLookups += 1
            entry.failed = true
        }
        pending[index] = entry
        finishDeviceIfDone(index)
        fill()
        if inFlight == 0, nextDevice == devices.count { promise.succeed(outcome) }
    }

    private func finishDeviceIfDone(_ index: Int) {
        guard let entry = pending[index], entry.left == 0 else { return }
        pending[index] = nil
        if entry.failed { outcome.failingDevices.append(index) }
    }
}
