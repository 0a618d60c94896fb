import RegistryCore
import RegistryWire

/// Everything a node decides with, as a plain value: the registry state, the clock, the log
/// position, and the rules. A request goes through three pure steps so that only the middle
/// one needs the engine's lock:
///
/// 1. ``prepare(_:resolver:limits:identifierKey:)`` validates what needs no state (bundle,
///    identifiers, batch size) and replaces each identifier by its keyed hash;
/// 2. ``decide(_:requestID:wallMillis:generator:operations:)`` changes the state and says what
///    happened, appending the operations to log;
/// 3. ``Decision/body`` turns that into the wire answer (UUID text and all).
///
/// ``handle(_:wallMillis:generator:operations:)`` runs the three in a row.
struct NodeState {
    var registry = RegistryState()
    /// Whether the members say this node was removed, as of ``RegistryState/membershipChanges``
    /// changes: read on every write, so it is not looked up again until the members change.
    private var removal: (changes: Int, removed: Bool) = (-1, false)
    var clock: HybridLogicalClock
    let nodeID: NodeID
    let epoch: UInt64
    /// The sequence number the next logged operation gets.
    var nextSequence: UInt64
    /// What this node holds of every log but its own current one, whose operations it numbers
    /// itself (``nextSequence``); ``versionVector`` shows them all.
    private var otherLogs: VersionVector
    /// The vendor rules in force: the cluster's (``VendorRuleHistory``), or the config file's
    /// while the node holds no change of them yet.
    private(set) var rules: VendorRules
    /// The config file's rules: the seed at a first start, and the default depth always.
    let configuredRules: VendorRules
    /// Counts changes of ``rules`` (see ``BundleResolver/version``).
    private(set) var rulesVersion = 0
    /// The registry's ``RegistryState/vendorRuleChanges`` when ``rules`` were last made.
    private var rulesSeen = -1
    let limits: Limits
    /// Names the devices that first installs presenting an IDFV create, the same on every node.
    let mintingKey: MintingKey
    /// Hashes identifiers before the state sees them (lookups here; registrations in ``prepare(_:resolver:limits:identifierKey:)``).
    let identifierKey: IdentifierKey
    /// The events of operations applied and not yet published to the watchers (the commit
    /// pipeline publishes them once durable).
    var feedStaging = FeedStaging()
    /// Whether a clone operation may be logged now: every other member runs a version that reads
    /// them (``LinkedPeers/clonesAllowed(wallMillis:members:own:)``). When not, a registration
    /// that shows a clone logs nothing, and a later one shows it again.
    var clonesAllowed = true

    init(
        registry: RegistryState = RegistryState(), clock: HybridLogicalClock, nodeID: NodeID, epoch: UInt64, nextSequence: UInt64,
        versionVector: VersionVector = VersionVector(), rules: VendorRules, limits: Limits, mintingKey: MintingKey = MintingKey(secret: ""),
        identifierKey: IdentifierKey = IdentifierKey(secret: "")
    ) {
        self.mintingKey = mintingKey
        self.identifierKey = identifierKey
        self.registry = registry
        self.clock = clock
        self.nodeID = nodeID
        self.epoch = epoch
        self.nextSequence = nextSequence
        self.otherLogs = versionVector
        self.rules = rules
        self.configuredRules = rules
        self.limits = limits
        refreshRules()
    }

    /// Makes ``rules`` again when the registry's vendor rule changes have changed since.
    mutating func refreshRules() {
        guard registry.vendorRuleChanges != rulesSeen else { return }
        rulesSeen = registry.vendorRuleChanges
        let history = registry.vendorRuleHistory
        // The history never holds two rules of one prefix or one name, so the rules are valid.
        let next =
            history.changes.isEmpty
            ? configuredRules : (try? VendorRules(rules: history.rules, defaultScope: configuredRules.defaultScope, aliases: history.aliases)) ?? configuredRules
        if next != rules {
            rules = next
            rulesVersion += 1
        }
    }

    /// Takes `registry`, holding `vector`, in place of the state (a peer's snapshot with this
    /// node's operations past it applied), and moves the clock past `clock`.
    mutating func install(_ registry: RegistryState, holding vector: VersionVector, clock newest: HLCTimestamp) {
        let recording = self.registry.recordsEvents
        self.registry = registry
        // The watchers' feed starts again from the installed state (``ChangeFeed/restart(holding:)``).
        if recording { self.registry.recordEvents(configuredRules: configuredRules.rules) }
        feedStaging = FeedStaging()
        otherLogs = vector
        clock = HybridLogicalClock(last: max(clock.last, newest), maxForwardDriftMillis: clock.maxForwardDriftMillis)
        rulesSeen = -1
        // The cached removal counted the old state's membership changes: the new state's count
        // may equal it and say otherwise.
        removal = (-1, false)
        refreshRules()
    }

    /// This node's own current log.
    var ownLog: LogID { LogID(origin: nodeID, epoch: epoch) }

    /// What the node holds of every (origin, epoch): every operation applied in memory, up to
    /// the sequence given for each.
    var versionVector: VersionVector {
        var vector = otherLogs
        vector.recordAll(through: max(nextSequence - 1, vector[ownLog]), in: ownLog)
        return vector
    }

    /// What came of an operation from another node's log.
    enum RemoteOutcome: Equatable, Sendable {
        /// Applied, and recorded as held.
        case applied
        /// Already held: skipped, nothing changed.
        case duplicate
        /// Operations `missing` of its log come first: nothing changed; it must wait until they
        /// have been applied, or be asked for again.
        case gap(missing: ClosedRange<UInt64>)
        /// Its timestamp is too far ahead of this node's clock: nothing changed.
        case clockRefused(HybridLogicalClock.Refusal)
    }

    /// The one way an operation of another log enters the state: what is already held is
    /// skipped, what would leave a gap waits, and otherwise the clock observes the operation's
    /// timestamp and the registry applies it (a join, so the order of logs does not matter).
    mutating func applyRemote(_ operation: LoggedOperation, wallMillis: UInt64) -> RemoteOutcome {
        let log = LogID(origin: operation.origin, epoch: operation.epoch)
        if log == ownLog {
            // Its own operations come back only as echoes of what it wrote.
            return operation.sequence < nextSequence ? .duplicate : .gap(missing: nextSequence...operation.sequence)
        }
        switch otherLogs.admission(of: operation.sequence, in: log) {
        case .duplicate: return .duplicate
        case .gap(let missing): return .gap(missing: missing)
        case .next: break
        }
        do {
            _ = try clock.observe(operation.timestamp, wallMillis: wallMillis)
        } catch {
            return .clockRefused(error)
        }
        applyAdmitted(operation.operation, of: log, sequence: operation.sequence, timestamp: operation.timestamp)
        otherLogs.record(operation.sequence, in: log)
        return .applied
    }

    /// Applies `operation`, the next of `log`, its timestamp observed; the caller records it in
    /// the version vector. Takes the logged operation's parts, not the whole: a batch's loop
    /// passes them from where they lie in its array, where a `LoggedOperation` argument was a copy
    /// of each one (its bytes and its operation's arrays or box retained, then released).
    private mutating func applyAdmitted(_ operation: Operation, of log: LogID, sequence: UInt64, timestamp: HLCTimestamp) {
        registry.apply(operation)
        if registry.recordsEvents {
            registry.moveEvents(to: &feedStaging, log: log, sequence: sequence, time: timestamp)
        }
    }

    /// Why a batch of another node's operations was refused whole, nothing of it applied.
    enum BatchRefusal: Error, Equatable, Sendable {
        /// Operations `missing` of `log` come before one of the batch and are not held.
        case gap(log: LogID, missing: ClosedRange<UInt64>)
        /// An operation of this node's own current log that it never wrote.
        case unwrittenOwnOperation(sequence: UInt64, next: UInt64)
        /// An operation's timestamp is too far ahead of this node's clock.
        case clockSkew(HybridLogicalClock.Refusal)

        /// The refusal as the peer receives it.
        var wireError: WireError {
            switch self {
            case .gap(let log, let missing):
                return WireError(
                    code: .invalidOperation, message: "the batch leaves a gap in \(log): operations \(missing) are not held here")
            case .unwrittenOwnOperation(let sequence, let next):
                return WireError(
                    code: .invalidOperation,
                    message: "the batch holds operation \(sequence) of this node's own log, which has written only up to \(next - 1)")
            case .clockSkew(.tooFarAhead(let remote, let ahead, let limit)):
                return WireError(
                    code: .clockSkew,
                    message: "an operation's timestamp \(remote) is \(ahead) ms ahead of this node's clock; at most \(limit) ms is allowed")
            }
        }
    }

    /// Applies a batch of another node's operations, in order, or none of them: each as
    /// ``applyRemote(_:wallMillis:)`` would, once the whole batch is known to be admissible (no
    /// gap, no operation of this node's own log beyond what it wrote, no timestamp too far ahead).
    /// Appends the operations applied (not the duplicates) to `applied`, for the log.
    mutating func applyRemoteBatch(
        _ operations: [LoggedOperation], wallMillis: UInt64, applied: inout [LoggedOperation]
    ) -> BatchRefusal? {
        // Checked a run of one log at a time (a batch is normally one run): the vector is read
        // once per run, not once per operation.
        var trial = [LogID: UInt64]()
        let runs = operations.runsByLog
        for (log, range) in runs {
            if log == ownLog {
                if let beyond = operations[range].first(where: { $0.sequence >= nextSequence }) {
                    return .unwrittenOwnOperation(sequence: beyond.sequence, next: nextSequence)
                }
                continue
            }
            var held = trial[log] ?? otherLogs[log]
            // Read in place through the array: a loop variable would copy each operation,
            // retaining and releasing its bytes and arrays.
            for index in range where operations[index].sequence > held {
                let sequence = operations[index].sequence
                guard sequence == held + 1 else { return .gap(log: log, missing: (held + 1)...(sequence - 1)) }
                if let refusal = clock.refusal(of: operations[index].timestamp, wallMillis: wallMillis) { return .clockSkew(refusal) }
                held = sequence
            }
            trial[log] = held
        }
        // The operations applied, as ranges of the batch in order.
        var appliedRanges = [Range<Int>]()
        // Admissible: each operation past what is held is the next of its log, and its timestamp
        // is accepted. Applied a run at a time, the vector read and written once a run, while the
        // index buckets of the operation ``RegistryState/prefetchDistance`` ahead are asked for.
        for (log, range) in runs where log != ownLog {
            var held = otherLogs[log]
            for index in range where operations[index].sequence > held {
                if index + RegistryState.prefetchDistance < operations.count {
                    registry.prefetch(for: operations[index + RegistryState.prefetchDistance].operation)
                }
                // Checked above against the same wall clock: a refusal here would be a bug, and
                // the rest of the run (a gap then) stays unapplied, as applyRemote would leave it.
                guard (try? clock.observe(operations[index].timestamp, wallMillis: wallMillis)) != nil else { break }
                applyAdmitted(
                    operations[index].operation, of: log, sequence: operations[index].sequence, timestamp: operations[index].timestamp)
                held = operations[index].sequence
                if appliedRanges.last?.upperBound == index {
                    appliedRanges[appliedRanges.count - 1] = appliedRanges[appliedRanges.count - 1].lowerBound..<(index + 1)
                } else {
                    appliedRanges.append(index..<(index + 1))
                }
            }
            if held > otherLogs[log] { otherLogs.recordAll(through: held, in: log) }
        }
        // The usual batch is applied whole: then `applied`, when it holds nothing yet, takes the
        // batch's array itself rather than a copy of every operation in it. A batch applied in
        // part hands over copies of its applied operations' bytes (`appendApart`).
        if applied.isEmpty, appliedRanges == [operations.indices] {
            applied = operations
        } else if appliedRanges == [operations.indices] {
            applied.append(contentsOf: operations)
        } else {
            Self.appendApart(operations, appliedRanges, to: &applied)
        }
        refreshRules()
        return nil
    }

    /// Appends operations `ranges` of a batch applied in part, their bytes
    /// (``LoggedOperation/encoded``) copied out of the batch's into one array of their own: the
    /// records the commit keeps for the peer links slice them (``LogWriter``), and a slice of the
    /// batch's bytes would keep all of them in memory for the few operations applied. So what
    /// ``RecentOperations`` keeps stays about the size of the operations it keeps, however many
    /// batches they came from.
    static func appendApart(_ operations: [LoggedOperation], _ ranges: [Range<Int>], to applied: inout [LoggedOperation]) {
        var bytes = [UInt8]()
        // Sized at once: every slice keeps the whole array, spare capacity included.
        bytes.reserveCapacity(ranges.joined().reduce(0) { $0 + (operations[$1].encoded?.count ?? 0) })
        // Filled before any slice is taken: a slice would make the next append copy the array.
        for index in ranges.joined() {
            if let encoded = operations[index].encoded { bytes.append(contentsOf: encoded) }
        }
        var start = 0
        for index in ranges.joined() {
            let op = operations[index]
            let encoded = op.encoded.map { encoded in
                defer { start += encoded.count }
                return bytes[start..<start + encoded.count]
            }
            applied.append(
                LoggedOperation(
                    origin: op.origin, epoch: op.epoch, sequence: op.sequence, timestamp: op.timestamp, operation: op.operation,
                    encoded: encoded))
        }
    }

    /// A request after the checks that need no state.
    enum Prepared: Sendable {
        case register(Result<Registration, WireError>)
        case registerBatch(ValidatedBatch)
        /// The removal of a member (a write: it logs the removal), its node ID checked.
        case removeMember(Result<NodeID, WireError>, force: Bool)
        /// A bind or an unbind (a write), its vendor, account and device checked.
        case binding(Result<BindingIntent, WireError>)
        /// A forget (a write), its device ID parsed.
        case forget(Result<DeviceID, WireError>)
        /// A change of the cluster's vendor rules (a write), its rule checked.
        case vendorChange(Result<VendorIntent, WireError>)
        /// Refused whole (a batch over the limit).
        case refused(WireError)
        /// Answered from the state as it is (resolve, lookup, stats, unknown bodies).
        case read(ClientBody)
    }

    /// A batch after validation: the valid registrations alone, in order (so that the state can
    /// warm what they will touch, see ``RegistryState/warm(for:newDevices:)``), and for each item
    /// of the batch its index among them or its error. Each registration is stored once and read
    /// in place, not copied (a copy retains and releases its rejected identifiers).
    struct ValidatedBatch: Sendable {
        var registrations: [Registration] = []
        var items: [Result<Int, WireError>] = []
    }

    /// What the state decided, not yet in wire form.
    enum Decision: Sendable {
        case registered(Result<RegistrationOutcome, WireError>)
        case registeredBatch([Result<RegistrationOutcome, WireError>])
        case answer(ServerBody)

        /// The wire answer.
        var body: ServerBody {
            switch self {
            case .registered(.success(let outcome)): return .registerResult(RegisterResult(outcome))
            case .registered(.failure(let error)): return .error(error)
            case .registeredBatch(let items):
                return .registerBatchResult(
                    items.map { item in
                        switch item {
                        case .success(let outcome): return .result(RegisterResult(outcome))
                        case .failure(let error): return .error(error)
                        }
                    })
            case .answer(let body): return body
            }
        }
    }

    static func prepare(_ body: ClientBody, resolver: inout BundleResolver, limits: Limits, identifierKey: IdentifierKey) -> Prepared {
        switch body {
        case .register(let request):
            return .register(validate(request, resolver: &resolver, identifierKey: identifierKey))
        case .registerBatch(let requests):
            guard requests.count <= Int(limits.maxBatchSize) else {
                return .refused(
                    WireError(
                        code: .batchTooLarge,
                        message: "batch of \(requests.count) registrations exceeds the limit of \(limits.maxBatchSize)"))
            }
            var batch = ValidatedBatch()
            batch.registrations.reserveCapacity(requests.count)
            batch.items.reserveCapacity(requests.count)
            for request in requests {
                switch validate(request, resolver: &resolver, identifierKey: identifierKey) {
                case .success(let registration):
                    batch.items.append(.success(batch.registrations.count))
                    batch.registrations.append(registration)
                case .failure(let error):
                    batch.items.append(.failure(error))
                }
            }
            return .registerBatch(batch)
        case .removeMember(let text, let force):
            guard let node = try? NodeID(text) else {
                return .removeMember(.failure(WireError(code: .invalidArgument, message: "\(text.debugDescription) is not a node ID")), force: force)
            }
            return .removeMember(.success(node), force: force)
        case .bind(let request):
            return .binding(prepareBinding(.bind, request, rules: resolver.rules, identifierKey: identifierKey))
        case .unbind(let request):
            return .binding(prepareBinding(.unbind, request, rules: resolver.rules, identifierKey: identifierKey))
        case .forget(let text):
            return .forget(prepareForget(text))
        case .vendor(let request):
            return prepareVendor(request)
        default:
            return .read(body)
        }
    }

    private static func validate(
        _ request: RegisterRequest, resolver: inout BundleResolver, identifierKey: IdentifierKey
    ) -> Result<Registration, WireError> {
        do {
            return .success(
                try Registration(bundle: request.bundleID, identifiers: request.identifiers, resolver: &resolver) { identifierKey.seal($0) })
        } catch {
            return .failure(WireError(error))
        }
    }

    /// Why the node refuses writes at `wallMillis`, nil when it takes them: its clock has run
    /// ahead of its wall clock by more than the bound peers apply (a wall clock that was wrong
    /// and has been set back, with the clock persisted). Every operation it stamped now would
    /// carry that future time, and peers would refuse them, and every operation after them in its
    /// log, until real time caught up: acknowledged writes that do not replicate. So it refuses
    /// them, retryably, naming the wait; reads go on. docs/operations.md says how to recover.
    ///
    /// A node that was removed from the cluster refuses writes too: its peers refuse it, so
    /// they could never replicate. The error names the members to send them to.
    func writeRefusal(wallMillis: UInt64) -> WireError? {
        let removed =
            removal.changes == registry.membershipChanges ? removal.removed : registry.clusterMembers[nodeID]?.removed == true
        if removed {
            let others = registry.clusterMembers.filter { !$0.value.removed && $0.key != nodeID && !$0.value.address.isEmpty }
                .map { "\($0.key) at \($0.value.address)" }.sorted()
            return WireError(
                code: .notAMember,
                message: "this node was removed from the cluster and takes no writes: send them to "
                    + (others.isEmpty ? "another member" : others.joined(separator: ", ")),
                retryable: true)
        }
        guard case .tooFarAhead(_, let ahead, let limit) = clock.refusal(of: clock.last, wallMillis: wallMillis) else { return nil }
        return WireError(
            code: .clockSkew,
            message:
                "this node's clock is \(ahead) ms ahead of its wall clock, more than the \(limit) ms its peers accept: it refuses writes until real time catches up (or its wall clock is corrected); send them to another node",
            retryable: true)
    }

    /// Applies a prepared request to the state.
    mutating func decide(
        _ prepared: Prepared, requestID: UInt64, wallMillis: UInt64, generator: inout some RandomNumberGenerator,
        operations: inout [LoggedOperation], access: ConnectionAccess = .unrestricted
    ) -> Decision {
        refreshRules()
        switch prepared {
        case .register, .registerBatch, .removeMember(.success, _), .binding(.success), .forget(.success), .vendorChange(.success):
            if removal.changes != registry.membershipChanges {
                removal = (registry.membershipChanges, registry.clusterMembers[nodeID]?.removed == true)
            }
            if let refusal = writeRefusal(wallMillis: wallMillis) { return .answer(.error(refusal)) }
        default: break
        }
        switch prepared {
        case .register(let registration):
            return .registered(
                registration.flatMap { register($0, wallMillis: wallMillis, generator: &generator, operations: &operations) })
        case .registerBatch(let batch):
            // Each valid registration ticks the clock once, in order, and may mint a device: both
            // are made first, so that the state can warm every index bucket the batch will touch.
            let stamps = batch.registrations.map { _ in clock.tick(wallMillis: wallMillis) }
            // The registrations are read through a buffer pointer, by index: an array's element
            // passed as an argument (or bound to a name, or zipped) is copied and destroyed,
            // retaining and releasing its rejected identifiers (`docs/performance.md`,
            // "Copies the floor comparison found").
            return batch.registrations.withUnsafeBufferPointer { registrations in
                let candidates = registrations.indices.map { index in
                    DeviceID.new(for: registrations[index], at: stamps[index], key: mintingKey, using: &generator)
                }
                registry.warm(for: batch.registrations, newDevices: candidates)
                return .registeredBatch(
                    batch.items.map { item in
                        item.flatMap { index in
                            // A later generation only after a forget (``RegistryState/register(_:at:origin:mint:)``).
                            register(
                                registrations[index], at: stamps[index],
                                mint: { [mintingKey] generation in
                                    generation == 0
                                        ? candidates[index]
                                        : DeviceID.new(
                                            for: registrations[index], at: stamps[index], generation: generation, key: mintingKey,
                                            using: &generator)
                                }, operations: &operations)
                        }
                    })
            }
        case .refused(let error):
            return .answer(.error(error))
        case .read(.resolve(let text)):
            guard access.allows(.read) else { return .answer(.error(ConnectionAccess.denied(.read))) }
            do {
                let id = try DeviceID(parsing: text)
                // Another vendor's device is not found: its existence is not revealed.
                let vendor = registry.vendor(of: id)
                if let vendor, !access.allows(.read, vendor: vendor.name) {
                    return .answer(.error(WireError(code: .notFound, message: "no device \(id)")))
                }
                // Known only as forgotten, its vendor unknown here: told only to who reaches every vendor.
                if registry.isGone(id), vendor != nil || access.reachesEveryVendor { return .answer(.error(Self.gone(id))) }
                guard let record = registry.resolve(id) else {
                    return .answer(.error(WireError(code: .notFound, message: "no device \(id)")))
                }
                return .answer(.device(DeviceRecordMessage(record)))
            } catch {
                return .answer(.error(WireError(error)))
            }
        case .read(.lookup(let request)):
            return .answer(lookup(request, access: access))
        case .binding(.success(let intent)):
            return .answer(decideBinding(intent, wallMillis: wallMillis, operations: &operations))
        case .binding(.failure(let error)):
            return .answer(.error(error))
        case .forget(.success(let id)):
            return .answer(decideForget(id, wallMillis: wallMillis, operations: &operations, access: access))
        case .forget(.failure(let error)):
            return .answer(.error(error))
        case .vendorChange(.success(let intent)):
            return .answer(decideVendor(intent, wallMillis: wallMillis, operations: &operations))
        case .vendorChange(.failure(let error)):
            return .answer(.error(error))
        case .read(.vendor(.list)):
            return .answer(.vendorRules(vendorRulesMessage))
        case .read(.account(let query)):
            return .answer(answerAccount(query, access: access))
        case .read(.clones(let vendor)):
            return .answer(answerClones(vendor: vendor, access: access))
        case .removeMember(.failure(let error), _):
            return .answer(.error(error))
        case .removeMember(.success(let node), _):
            guard node != nodeID else {
                return .answer(.error(WireError(code: .invalidArgument, message: "a node cannot remove itself; ask another member")))
            }
            guard registry.clusterMembers[node] != nil else {
                return .answer(.error(WireError(code: .notFound, message: "\(node) is not a member of this cluster")))
            }
            changeMembership(node, address: "", removed: true, wallMillis: wallMillis, operations: &operations)
            return .answer(.memberRemoved(nodeID: node.value))
        case .read:
            // The connection handles the handshake and the engine stats; anything else is unknown.
            return .answer(.error(WireError(code: .unknownMessage, message: "request \(requestID) has no body this node knows")))
        }
    }

    private mutating func register(
        _ registration: Registration, wallMillis: UInt64, generator: inout some RandomNumberGenerator,
        operations: inout [LoggedOperation]
    ) -> Result<RegistrationOutcome, WireError> {
        let now = clock.tick(wallMillis: wallMillis)
        return register(
            registration, at: now,
            mint: { [mintingKey] generation in
                DeviceID.new(for: registration, at: now, generation: generation, key: mintingKey, using: &generator)
            }, operations: &operations)
    }

    /// Registers at `now`, a tick of the clock; `mint` names a new device if there is one.
    /// Refused, retryably, while a claim it would make must wait for a forgotten device that has
    /// not arrived (``RegistryState/register(_:at:origin:holdingBack:mint:)``). The refusal names
    /// no device: one restored from a snapshot has no vendor here, and is told only to whoever
    /// reaches every vendor.
    private mutating func register(
        _ registration: Registration, at now: HLCTimestamp, mint: (UInt32) -> DeviceID, operations: inout [LoggedOperation]
    ) -> Result<RegistrationOutcome, WireError> {
        guard let (op, outcome) = registry.register(registration, at: now, origin: nodeID, holdingBack: true, mint: mint) else {
            let vendor = registry.vendorRuleHistory.aliases.filing(registration.vendor)
            return .failure(
                WireError(
                    code: .notCaughtUp,
                    message:
                        "this node holds the forget of a device it has not received yet; a registration that claims an identifier new to \(vendor.name) waits for it, as the forgotten device may have claimed it. Retry shortly, or on another node",
                    retryable: true))
        }
        if registry.recordsEvents { registry.moveEvents(to: &feedStaging, log: ownLog, sequence: nextSequence, time: now) }
        // A copy of the operation is kept only when a clone may follow from it: otherwise the
        // log takes it as it is (a copy retains and releases its merged devices).
        let decided = mayLogClone(after: op) ? op : nil
        operations.append(
            LoggedOperation(origin: nodeID, epoch: epoch, sequence: nextSequence, timestamp: now, operation: .registration(op)))
        nextSequence += 1
        if let decided { logSuspectedClone(of: registration, decided: decided, wallMillis: now.millis, operations: &operations) }
        return .success(outcome)
    }

    /// Logs and applies a membership change made on this node: `node` joined at `address`, or
    /// was removed.
    mutating func changeMembership(
        _ node: NodeID, address: String, removed: Bool, wallMillis: UInt64, operations: inout [LoggedOperation]
    ) {
        let now = clock.tick(wallMillis: wallMillis)
        log(.membership(MembershipOp(node: node, address: address, removed: removed, at: now)), at: now, operations: &operations)
    }

    /// Applies `operation`, made on this node at `now` (a tick of its clock), and appends it to
    /// its log under the next sequence number. (A registration is applied as it is decided, by
    /// ``RegistryState/register(_:at:origin:mint:)``, and only appended.)
    mutating func log(_ operation: Operation, at now: HLCTimestamp, operations: inout [LoggedOperation]) {
        registry.apply(operation)
        if registry.recordsEvents { registry.moveEvents(to: &feedStaging, log: ownLog, sequence: nextSequence, time: now) }
        operations.append(LoggedOperation(origin: nodeID, epoch: epoch, sequence: nextSequence, timestamp: now, operation: operation))
        nextSequence += 1
        refreshRules()
    }

    private func lookup(_ request: LookupRequest, access: ConnectionAccess) -> ServerBody {
        do throws(IdentityError) {
            guard let name = try Self.vendorName(of: request.scope, rules: rules) else {
                return .error(WireError(code: .invalidArgument, message: "a lookup needs a bundle_id or a vendor"))
            }
            guard access.allows(.read, vendor: name) else { return .error(ConnectionAccess.denied(.read, vendor: name)) }
            guard let presented = request.identifier else { throw IdentityError.missingIdentifier }
            let identifier = try Identifier(presented)
            // A vendor this process never made holds nothing (``Vendor/init(known:)``).
            guard let vendor = Vendor(known: name), let record = registry.lookup(vendor: vendor, identifier: identifierKey.seal(identifier)) else {
                return .error(WireError(code: .notFound, message: "no device claims \(identifier) in vendor \(name)"))
            }
            return .device(DeviceRecordMessage(record))
        } catch {
            return .error(WireError(error))
        }
    }
}

extension RegisterResult {
    /// The wire form of a core outcome.
    init(_ outcome: RegistrationOutcome) {
        self.init(
            deviceIDText: UUIDText(uuid: outcome.device.uuid), created: outcome.created, vendor: outcome.vendor.name,
            replacedDeviceIDs: outcome.replaced.map(\.description), rejectedIdentifiers: outcome.rejected)
    }
}

extension NodeState.Prepared {
    /// Whether preparing it read the vendor rules (a bundle's vendor, a named vendor), so that it
    /// must be prepared again when they changed since.
    var dependsOnVendorRules: Bool {
        switch self {
        case .register, .registerBatch, .binding: return true
        default: return false
        }
    }
}
