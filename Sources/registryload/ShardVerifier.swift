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
    /// Model accounts with any problem, likewise.
    var failingAccounts: [Int] = []
}

/// Runs the lookups of `--verify` for one shard, pipelined over its lanes: for each device,
/// each identifier it ever presented, on each endpoint, scoped by vendor; then for each account
/// the run bound, its devices on each endpoint, which must be the one device it was last bound to.
///
/// Lives on the shard's loop only (created and called there), like the shard itself.
final class ShardVerifier {
    private let shard: LoadShard
    private let devices: [Int]
    private let accounts: [Int]
    private var nextAccount = 0
    /// Per account being checked: answers outstanding, whether anything failed.
    private var pendingAccounts: [Int: (left: Int, failed: Bool)] = [:]
    private let endpoints: Int
    private let promise: EventLoopPromise<VerificationOutcome>
    private var outcome = VerificationOutcome()
    private var nextDevice = 0
    private var inFlight = 0
    private var laneCursor: [Int]
    private let endpointLanes: [[Int]]
    /// Per device being checked: lookups outstanding, the first ID seen, whether anything failed.
    private var pending: [Int: (left: Int, first: UUID128?, failed: Bool)] = [:]

    init(shard: LoadShard, devices: [Int], accounts: [Int], endpoints: Int, promise: EventLoopPromise<VerificationOutcome>) {
        self.shard = shard
        self.devices = devices
        self.accounts = accounts
        self.endpoints = endpoints
        self.promise = promise
        self.endpointLanes = (0..<endpoints).map { shard.lanes(to: $0) }
        self.laneCursor = Array(repeating: 0, count: endpoints)
    }

    func start() {
        proceed()
    }

    /// Sends what the in-flight limit allows next; once nothing is left to send or answer, reports.
    private func proceed() {
        fill()
        if finished { promise.succeed(outcome) }
    }

    private func fill() {
        let limit = shard.lanes.count * shard.plan.inFlight
        while inFlight < limit, nextDevice < devices.count {
            check(devices[nextDevice])
            nextDevice += 1
        }
        while inFlight < limit, nextDevice == devices.count, nextAccount < accounts.count {
            checkAccount(accounts[nextAccount])
            nextAccount += 1
        }
    }

    private var finished: Bool { inFlight == 0 && nextDevice == devices.count && nextAccount == accounts.count }

    private func checkAccount(_ index: Int) {
        let account = shard.workload.accounts[index]
        guard let bound = account.device else { return }
        let device = shard.workload.devices[bound]
        let query = AccountQuery(scope: .vendor(shard.plan.catalogue.vendorName(account.vendor)), subject: .account(account.name))
        pendingAccounts[index] = (endpoints, false)
        for endpoint in 0..<endpoints {
            let lanes = endpointLanes[endpoint]
            guard !lanes.isEmpty else {
                outcome.failedLookups += 1
                pendingAccounts[index]!.left -= 1
                pendingAccounts[index]!.failed = true
                continue
            }
            let lane = lanes[laneCursor[endpoint] % lanes.count]
            laneCursor[endpoint] += 1
            inFlight += 1
            outcome.lookups += 1
            shard.send(.account(query), on: lane) { result in self.accountAnswered(index, device: device, result: result.map(\.body)) }
        }
        finishAccountIfDone(index)
    }

    private func accountAnswered(_ index: Int, device: ModelDevice, result: Result<ServerBody, RegistryClientError>) {
        let verdict: Verdict
        switch result {
        case .success(.accounts(let found)) where found.isEmpty:
            verdict = .lost
        case .success(.accounts(let found)):
            let bound = found.count == 1 ? found[0].bound.compactMap { UUID128(text: $0.deviceID) } : []
            verdict = bound.count == 1 && device.accepts(bound[0]) ? .held : .mismatched
        default:
            verdict = .failed
        }
        pendingAccounts[index]!.left -= 1
        if count(verdict) { pendingAccounts[index]!.failed = true }
        finishAccountIfDone(index)
        proceed()
    }

    private func finishAccountIfDone(_ index: Int) {
        guard let entry = pendingAccounts[index], entry.left == 0 else { return }
        pendingAccounts[index] = nil
        if entry.failed { outcome.failingAccounts.append(index) }
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
        var entry = pending[index]!
        let verdict: Verdict
        switch result {
        case .success(.device(let record)):
            if let id = UUID128(text: record.deviceID), device.accepts(id), entry.first == nil || entry.first == id {
                entry.first = id
                verdict = .held
            } else {
                verdict = .mismatched
            }
        case .success(.error(let error)) where error.code == .notFound:
            verdict = .lost
        default:
            verdict = .failed
        }
        entry.left -= 1
        if count(verdict) { entry.failed = true }
        pending[index] = entry
        finishDeviceIfDone(index)
        proceed()
    }

    /// What one answer says of the device or account it checks.
    private enum Verdict {
        case held, lost, mismatched, failed
    }

    /// Counts an answered lookup in ``outcome``; true when it found a problem.
    private func count(_ verdict: Verdict) -> Bool {
        inFlight -= 1
        switch verdict {
        case .held: return false
        case .lost: outcome.lost += 1
        case .mismatched: outcome.mismatched += 1
        case .failed: outcome.failedLookups += 1
        }
        return true
    }

    private func finishDeviceIfDone(_ index: Int) {
        guard let entry = pending[index], entry.left == 0 else { return }
        pending[index] = nil
        if entry.failed { outcome.failingDevices.append(index) }
    }
}
