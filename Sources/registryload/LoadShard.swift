import NIOCore
import RegistryClient
import RegistryCore
import LoadGeneration
import RegistryWire

/// Monotonic nanoseconds, the clock every latency is measured with.
func monotonicNanos() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

/// One connection of a shard and the endpoint it goes to.
struct Lane: Sendable {
    let client: RegistryClient
    let endpoint: Int
}

/// Registrations planned together: one frame to one lane, plus for concurrent-siblings pairs a
/// second frame with the other halves to another lane, both sent at the same moment.
struct PlannedStep {
    let units: [LoadUnit]
    /// When the step was meant to be sent (open loop) or was sent (closed loop).
    let intended: UInt64
    var registrations: Int { units.reduce(0) { $0 + $1.registrations } }
}

/// One answer per registration of a frame: the device ID, or the error code's name.
typealias ItemAnswers = [Result<UUID128, FailureCode>]

/// An error code as the report counts it.
struct FailureCode: Error, Hashable {
    let name: String
}

/// Drives one share of the load on one event loop: its lanes, its workload generator, and its
/// measurements. Closed loop keeps `inFlight` steps outstanding per lane; open loop sends steps
/// at the schedule's intended times and queues them when every slot is busy, charging the wait
/// to latency.
///
/// A lane whose connection closes is lost: its unanswered requests count as `CONNECTION_CLOSED`
/// failures, and no step is sent on it again. So is one that has had requests outstanding and no
/// answer for the plan's `answerTimeout`: its connection is given up, so that a node that stopped
/// answering (stalled, or gone without closing the connection) cannot keep the run from ending.
/// The others carry on with their own share of the in-flight limit; once every lane is lost the
/// shard stops, and what it had still to send counts as failed too.
///
/// `@unchecked Sendable`: every stored `var` is read and written only on `loop`. The entry
/// points (`start`, `takeInterval`, `verify`, `send`, `stopWatchingAnswers`) are called through
/// `loop.submit`/`loop.execute`/`loop.flatSubmit`, the answer watch is a task scheduled on `loop`,
/// and client callbacks run on `loop` because every lane's channel was created on it
/// (`RegistryClient.enqueue` calls back on the channel's event loop).
final class LoadShard: @unchecked Sendable {
    let loop: any EventLoop
    let lanes: [Lane]
    let plan: LoadPlan
    private(set) var workload: WorkloadGenerator
    private let rate: Double?

    private var schedule: OpenLoopSchedule?
    private var measureStart: UInt64 = 0
    private(set) var measureEnd: UInt64 = 0
    private var stopIssuing = false
    private var requestsIssued: UInt64 = 0
    private let requestLimit: UInt64?
    private var inFlightSteps = 0
    private var backlog: [PlannedStep] = []
    private var backlogHead = 0
    private var laneCursor = 0
    private var dirtyLanes = Set<Int>()
    private var flushScheduled = false
    /// Lanes whose connection closed, with the reason the client gave.
    private(set) var lostLanes: [Int: String] = [:]
    /// For each lane, the requests sent on it and not yet answered, and the answers it has had
    /// (counted on the request path; the clock is read only by ``abandonSilentLanes()``).
    private var unanswered: [Int]
    private var answers: [UInt64]
    /// For each lane, its answers at the last check that found it answering or with nothing
    /// outstanding, and when that was (monotonic ns).
    private var lastProgress: [(answers: UInt64, at: UInt64)]
    /// Gives up lanes whose answers stopped (``abandonSilentLanes()``); nil when the plan waits
    /// for ever.
    private var answerWatch: RepeatedTask?
    private var done: EventLoopPromise<Void>?

    private(set) var total = ShardTotals()
    private var interval = ShardTotals()

    init(loop: any EventLoop, lanes: [Lane], plan: LoadPlan, seed: UInt64, rate: Double?, requestLimit: UInt64?) {
        self.loop = loop
        self.lanes = lanes
        self.plan = plan
        self.rate = rate
        self.requestLimit = requestLimit
        self.workload = WorkloadGenerator(mix: plan.mix, catalogue: plan.catalogue, seed: seed, trackDevices: plan.verify)
        self.unanswered = Array(repeating: 0, count: lanes.count)
        self.answers = Array(repeating: 0, count: lanes.count)
        self.lastProgress = Array(repeating: (0, 0), count: lanes.count)
    }

    // MARK: - Running

    /// Starts sending; the future completes when the run has stopped and every step is answered.
    func start(at startTime: UInt64) -> EventLoopFuture<Void> {
        loop.preconditionInEventLoop()
        let promise = loop.makePromise(of: Void.self)
        done = promise
        measureStart = startTime + plan.warmup.nanoseconds
        if plan.answerTimeout.nanoseconds > 0 {
            let now = monotonicNanos()
            lastProgress = lastProgress.map { ($0.answers, now) }
            // Checked four times a timeout, and at least every second: a silent lane is given up
            // at most a quarter of the timeout (or a second) after it has been silent that long.
            let period = TimeAmount.nanoseconds(Int64(max(1_000_000, min(plan.answerTimeout.nanoseconds / 4, 1_000_000_000))))
            answerWatch = loop.scheduleRepeatedTask(initialDelay: period, delay: period) { _ in self.abandonSilentLanes() }
        }
        if let duration = plan.duration {
            let end = measureStart + duration.nanoseconds
            loop.scheduleTask(deadline: .uptimeNanoseconds(end)) { self.stop(at: end) }
        }
        if let rate {
            schedule = OpenLoopSchedule(rate: rate, start: startTime)
            tick()
        } else {
            for _ in 0..<capacity where !stopIssuing {
                if let step = plannedStep(intended: monotonicNanos()) { issue(step) }
            }
            flushDirtyLanes()
            // A shard left no request to send (`--requests` below `--threads`) is done at once.
            finishIfIdle()
        }
        return promise.futureResult
    }

    /// Steps that may be outstanding at once: `inFlight` for each lane still connected.
    private var capacity: Int { (lanes.count - lostLanes.count) * plan.inFlight }

    /// Ends the measured window, unless the run ended already (every lane lost, or every
    /// request of `--requests` answered). In open loop the steps due in it and still waiting for
    /// room (every lane had `inFlight` outstanding) are not sent, whether or not `--requests`
    /// stopped the issuing first: they count as failed (`NOT_SENT`), so that a server that fell
    /// behind makes the run invalid instead of holding it open while the backlog drains.
    private func stop(at time: UInt64) {
        guard measureEnd == 0 else { return }
        stopIssuing = true
        measureEnd = time
        for step in backlog[backlogHead...] where step.intended >= measureStart && step.intended <= time {
            total.recordFailure(Self.notSent.name, count: UInt64(step.registrations))
        }
        backlog.removeAll()
        backlogHead = 0
        finishIfIdle()
    }

    private func finishIfIdle() {
        guard stopIssuing, inFlightSteps == 0, backlogHead == backlog.count else { return }
        if measureEnd == 0 { measureEnd = monotonicNanos() }
        done?.succeed()
        done = nil
    }

    /// The units of a step intended at `intended`: a batch, or fewer when `--requests` leaves
    /// fewer to send in the measured window (none once it is reached). The last unit may take
    /// the count one past it: a sibling pair or a move sends two requests.
    private func nextUnits(intended: UInt64) -> [LoadUnit] {
        var left = Int.max
        if let requestLimit, intended >= measureStart { left = Int(requestLimit - min(requestsIssued, requestLimit)) }
        var units = [LoadUnit]()
        units.reserveCapacity(plan.batch)
        var requests = 0
        while units.count < plan.batch, requests < left {
            let unit = workload.next()
            units.append(unit)
            requests += unit.registrations
        }
        return units
    }

    /// The next step, counted; nil, and the issuing stopped, when `--requests` leaves none.
    private func plannedStep(intended: UInt64) -> PlannedStep? {
        let units = nextUnits(intended: intended)
        guard !units.isEmpty else {
            stopIssuing = true
            return nil
        }
        let step = PlannedStep(units: units, intended: intended)
        countIssued(step)
        return step
    }

    private func countIssued(_ step: PlannedStep) {
        guard let requestLimit, step.intended >= measureStart else { return }
        requestsIssued += UInt64(step.registrations)
        if requestsIssued >= requestLimit {
            stopIssuing = true
        }
    }

    /// Open loop: sends every step whose intended time has come, then sleeps until the next.
    private func tick() {
        guard var schedule, !stopIssuing else { return }
        let now = monotonicNanos()
        while !stopIssuing, schedule.nextIntended <= now {
            let units = nextUnits(intended: schedule.nextIntended)
            guard !units.isEmpty else {
                stopIssuing = true
                break
            }
            let step = PlannedStep(units: units, intended: schedule.take(items: units.reduce(0) { $0 + $1.registrations }))
            if step.intended >= measureStart {
                total.schedulerLag.record(now - step.intended)
                interval.schedulerLag.record(now - step.intended)
            }
            countIssued(step)
            if inFlightSteps < capacity {
                issue(step)
            } else {
                backlog.append(step)
            }
        }
        self.schedule = schedule
        flushDirtyLanes()
        if !stopIssuing {
            loop.scheduleTask(deadline: .uptimeNanoseconds(schedule.nextIntended)) { self.tick() }
        } else {
            finishIfIdle()
        }
    }

    /// The next connected lane in turn to a different endpoint than lane `other` when one is
    /// connected, else another connection, else `other` itself.
    private func nextLane(avoiding other: Int) -> Int {
        var fallback: Int?
        for _ in 0..<lanes.count {
            let index = laneCursor
            laneCursor = (laneCursor + 1) % lanes.count
            guard lostLanes[index] == nil else { continue }
            if lanes[index].endpoint != lanes[other].endpoint { return index }
            if index != other, fallback == nil { fallback = index }
        }
        return fallback ?? other
    }

    /// The connected lane with the fewest requests outstanding, the next in turn among equals
    /// (called only while a lane is connected: ``capacity`` is above zero):
    /// each connection keeps about `inFlight` outstanding, and a connection whose node slows or
    /// stops answering is not handed a share of every new step (taken in turn, a stalled lane
    /// soon held nearly every outstanding step, and the others sat idle until it was given up).
    private func leastLoadedLane() -> Int {
        var best: Int?
        for offset in 0..<lanes.count {
            let index = (laneCursor + offset) % lanes.count
            guard lostLanes[index] == nil else { continue }
            if best == nil || unanswered[index] < unanswered[best!] { best = index }
        }
        laneCursor = (best! + 1) % lanes.count
        return best!
    }

    private func issue(_ step: PlannedStep) {
        inFlightSteps += 1
        let sent = monotonicNanos()
        let primary = leastLoadedLane()
        // Most steps hold registrations alone: those are not copied.
        let bindsAccounts = step.units.contains { $0.kind.isBinding }
        let registrations = bindsAccounts ? step.units.filter { !$0.kind.isBinding } : step.units
        let primaryRequests = registrations.map { plan.catalogue.request(for: $0) }
        let partnerRequests = registrations.compactMap { plan.catalogue.partnerRequest(for: $0) }
        let bindings = bindsAccounts ? step.units.filter(\.kind.isBinding).map { (unit: $0, requests: workload.bindingRequests(for: $0)) } : []
        let frames = (primaryRequests.isEmpty ? 0 : 1) + (partnerRequests.isEmpty ? 0 : 1) + bindings.reduce(0) { $0 + $1.requests.count }
        let tracker = StepTracker(step: step, registrationUnits: registrations, sent: sent, framesLeft: frames)
        if !primaryRequests.isEmpty {
            send(primaryRequests, on: primary, after: causalToken(of: step)) { answers, token in
                tracker.primary = answers
                tracker.token.merge(token)
                self.frameAnswered(tracker, registrations: primaryRequests.count, answers: answers)
            }
        }
        if !partnerRequests.isEmpty {
            // Pairs are new devices: nothing to read first.
            send(partnerRequests, on: nextLane(avoiding: primary), after: .empty) { answers, token in
                tracker.partner = answers
                tracker.token.merge(token)
                self.frameAnswered(tracker, registrations: partnerRequests.count, answers: answers)
            }
        }
        // An account's requests all go on one connection, as one backend session would send them:
        // a node answers a connection in order, so a move's unbind comes before its bind, and
        // each move finds the account where the last one left it.
        for (unit, requests) in bindings {
            tracker.bindingsFailed[unit.account!] = false
            let connected = lanes.indices.filter { lostLanes[$0] == nil }
            let lane = connected[unit.account! % connected.count]
            let after = plan.causalTokens ? workload.bindingToken(for: unit) : .empty
            for body in requests {
                send(body, on: lane, after: after) { result in
                    let answer = Self.bindingAnswer(result.map(\.body))
                    if case .failure = answer { tracker.bindingsFailed[unit.account!] = true }
                    self.frameAnswered(tracker, registrations: 1, answers: [answer])
                }
            }
        }
    }

    /// A bind's or an unbind's answer as the report counts it: success when it bound or unbound
    /// (a bind of a device bound already counts too); a bind refused past the vendor's limit, or
    /// an unbind that found nothing bound, means the run's model was wrong.
    static func bindingAnswer(_ result: Result<ServerBody, RegistryClientError>) -> Result<UUID128, FailureCode> {
        switch result {
        case .success(.bindResult(let result)):
            switch result.outcome {
            case .bound, .alreadyBound, .unbound: return .success(.zero)
            case .rejected: return .failure(FailureCode(name: "BIND_REJECTED"))
            case .notBound: return .failure(FailureCode(name: "NOT_BOUND"))
            case .unspecified: return .failure(FailureCode(name: "UNEXPECTED_ANSWER"))
            }
        default:
            return itemAnswers(result, count: 1)[0]
        }
    }

    /// The tokens of the known devices a step registers again, merged, as an app on each would
    /// send them (`--causal-tokens`); one frame carries one token.
    private func causalToken(of step: PlannedStep) -> CausalToken {
        guard plan.causalTokens else { return .empty }
        var token = CausalToken.empty
        for unit in step.units {
            if let known = unit.known { token.merge(workload.devices[known].token) }
        }
        return token
    }

    /// Sends registrations as one frame (a single RegisterRequest when there is one) and
    /// calls back on the loop with one answer per registration, and the answer's causal token.
    private func send(
        _ requests: [RegisterRequest], on lane: Int, after: CausalToken, answered: @escaping (ItemAnswers, CausalToken) -> Void
    ) {
        let body: ClientBody = requests.count == 1 && plan.batch == 1 ? .register(requests[0]) : .registerBatch(requests)
        let count = requests.count
        send(body, on: lane, after: after) { result in
            answered(Self.itemAnswers(result.map(\.body), count: count), (try? result.get().token) ?? .empty)
        }
    }

    /// Queues `body` on a lane (flushed once per loop turn) and calls back on the loop. A closed
    /// connection marks the lane lost before the callback runs.
    func send(
        _ body: ClientBody, on lane: Int, after: CausalToken = .empty,
        answered: @escaping (Result<ServerReply, RegistryClientError>) -> Void
    ) {
        unanswered[lane] += 1
        let callback = NIOLoopBound(
            { (result: Result<ServerReply, RegistryClientError>) in
                self.unanswered[lane] -= 1
                self.answers[lane] += 1
                if case .failure(.connectionClosed(let reason)) = result { self.laneLost(lane, reason: reason) }
                answered(result)
            }, eventLoop: loop)
        lanes[lane].client.enqueue(body, after: after) { result in callback.value(result) }
        markDirty(lane)
    }

    /// Gives up every connected lane that has had requests outstanding and no answer at each
    /// check for the plan's `answerTimeout`: its connection closes, and its requests fail as
    /// `CONNECTION_CLOSED` (``laneLost(_:reason:)``).
    private func abandonSilentLanes() {
        let now = monotonicNanos()
        var silent = [Int]()
        for lane in lanes.indices where lostLanes[lane] == nil {
            if unanswered[lane] == 0 || answers[lane] != lastProgress[lane].answers {
                lastProgress[lane] = (answers[lane], now)
            } else if now - lastProgress[lane].at >= plan.answerTimeout.nanoseconds {
                silent.append(lane)
            }
        }
        for lane in silent { lanes[lane].client.abandon(reason: "no answer in \(plan.answerTimeout)") }
    }

    /// Stops watching for lanes whose answers stopped: the run, verification included, is over.
    func stopWatchingAnswers() {
        loop.preconditionInEventLoop()
        answerWatch?.cancel()
        answerWatch = nil
    }

    /// Stops using a lane whose connection closed; with none left, stops the run and counts
    /// every step still waiting to be sent as failed.
    private func laneLost(_ lane: Int, reason: String) {
        guard lostLanes[lane] == nil else { return }
        lostLanes[lane] = reason
        guard lostLanes.count == lanes.count else { return }
        if !stopIssuing {
            stopIssuing = true
            measureEnd = monotonicNanos()
        }
        for step in backlog[backlogHead...] where step.intended >= measureStart {
            total.recordFailure(Self.connectionClosed.name, count: UInt64(step.registrations))
        }
        backlog.removeAll()
        backlogHead = 0
    }

    /// How the report counts registrations lost with their connection.
    static let connectionClosed = FailureCode(name: "CONNECTION_CLOSED")
    /// How the report counts registrations due in the window and never sent (``stop(at:)``).
    static let notSent = FailureCode(name: "NOT_SENT")

    static func itemAnswers(_ result: Result<ServerBody, RegistryClientError>, count: Int) -> ItemAnswers {
        switch result {
        case .success(.registerResult(let result)):
            return [parseID(result.deviceIDText)]
        case .success(.registerBatchResult(let items)):
            guard items.count == count else {
                return Array(repeating: .failure(FailureCode(name: "BAD_BATCH_ANSWER")), count: count)
            }
            return items.map { item in
                switch item {
                case .result(let result): return parseID(result.deviceIDText)
                case .error(let error): return .failure(FailureCode(name: error.code.name))
                }
            }
        case .success(.error(let error)):
            return Array(repeating: .failure(FailureCode(name: error.code.name)), count: count)
        case .success:
            return Array(repeating: .failure(FailureCode(name: "UNEXPECTED_ANSWER")), count: count)
        case .failure(let error):
            let code: FailureCode
            switch error {
            case .server(let wire): code = FailureCode(name: wire.code.name)
            case .connectionClosed: code = connectionClosed
            default: code = FailureCode(name: "TRANSPORT")
            }
            return Array(repeating: .failure(code), count: count)
        }
    }

    /// The device ID of an answer (decoded as a UUID, without a string, when it is UUID text).
    private static func parseID(_ text: UUIDText) -> Result<UUID128, FailureCode> {
        text.uuid.map { .success($0) } ?? .failure(FailureCode(name: "BAD_DEVICE_ID"))
    }

    private func frameAnswered(_ tracker: StepTracker, registrations: Int, answers: ItemAnswers) {
        let now = monotonicNanos()
        let latency = now &- tracker.step.intended
        let service = now &- tracker.sent
        let measured = tracker.step.intended >= measureStart
        let inWindow = measured && (measureEnd == 0 || now <= measureEnd)
        // Latency is that of the answers the node served: a failed answer (often a fast one,
        // such as a refused token's) would make the percentiles, and the objectives judged on
        // them, look better than the service was. Failures are counted apart, and a run with
        // many is invalid (``RunJudgement``).
        let served = answers.reduce(0) { count, answer in
            if case .failure(let code) = answer, !RunJudgement.ruleAnswers.contains(code.name) { return count }
            return count + 1
        }
        if served > 0 {
            // The progress line shows warm-up too; the run's totals only the measured window.
            interval.latency.record(latency, count: served)
            interval.service.record(service, count: served)
            if measured {
                total.latency.record(latency, count: served)
                total.service.record(service, count: served)
            }
        }
        for answer in answers {
            switch answer {
            case .success:
                interval.acknowledged += 1
                if inWindow { total.acknowledged += 1 }
            case .failure(let code):
                interval.recordFailure(code.name)
                // Past the window too (unlike acknowledgements): a lost connection fails its
                // outstanding requests after it ended the run.
                if measured { total.recordFailure(code.name) }
            }
        }
        tracker.framesLeft -= 1
        guard tracker.framesLeft == 0 else { return }
        acknowledge(tracker)
        inFlightSteps -= 1
        if rate == nil {
            if !stopIssuing, inFlightSteps < capacity, let step = plannedStep(intended: monotonicNanos()) { issue(step) }
        } else if backlogHead < backlog.count, inFlightSteps < capacity {
            issue(backlog[backlogHead])
            backlogHead += 1
            if backlogHead == backlog.count {
                backlog.removeAll(keepingCapacity: true)
                backlogHead = 0
            }
        }
        finishIfIdle()
    }

    /// Feeds every acknowledged registration, bind and move back into the workload model.
    private func acknowledge(_ tracker: StepTracker) {
        for unit in tracker.step.units where unit.kind.isBinding {
            workload.settle(unit, succeeded: tracker.bindingsFailed[unit.account!] == false)
        }
        var partnerIndex = 0
        for (index, unit) in tracker.registrationUnits.enumerated() {
            var partnerID: UUID128?
            var partnerOK = true
            if unit.partnerApp != nil {
                if case .success(let id)? = tracker.partner?[partnerIndex] { partnerID = id } else { partnerOK = false }
                partnerIndex += 1
            }
            guard case .success(let id)? = tracker.primary?[index], partnerOK else { continue }
            workload.acknowledge(unit, deviceID: id, partnerID: partnerID, token: plan.causalTokens ? tracker.token : .empty)
        }
    }

    private func markDirty(_ lane: Int) {
        dirtyLanes.insert(lane)
        guard !flushScheduled else { return }
        flushScheduled = true
        // Runs after the answers of the current read are handled: one flush for all of them.
        loop.execute { self.flushDirtyLanes() }
    }

    private func flushDirtyLanes() {
        flushScheduled = false
        for lane in dirtyLanes { lanes[lane].client.flush() }
        dirtyLanes.removeAll(keepingCapacity: true)
    }

    /// The measurements since the previous call, for the progress line.
    func takeInterval() -> ShardTotals {
        loop.preconditionInEventLoop()
        defer { interval = ShardTotals() }
        return interval
    }

    // MARK: - Verification

    /// Looks up every identifier of every acknowledged device on every endpoint, and every bound
    /// account's devices, and compares the answers with what was acknowledged. `devices` and
    /// `accounts` select which model devices and accounts to check.
    func verify(devices: [Int], accounts: [Int], endpoints: Int) -> EventLoopFuture<VerificationOutcome> {
        loop.preconditionInEventLoop()
        let promise = loop.makePromise(of: VerificationOutcome.self)
        let verifier = ShardVerifier(shard: self, devices: devices, accounts: accounts, endpoints: endpoints, promise: promise)
        verifier.start()
        return promise.futureResult
    }

    /// The lanes that go to `endpoint`.
    func lanes(to endpoint: Int) -> [Int] {
        lanes.indices.filter { lanes[$0].endpoint == endpoint && lostLanes[$0] == nil }
    }
}

/// The frames of one step still to be answered.
final class StepTracker {
    let step: PlannedStep
    /// The step's registrations, in the order of the primary frame's answers.
    let registrationUnits: [LoadUnit]
    let sent: UInt64
    var framesLeft: Int
    var primary: ItemAnswers?
    var partner: ItemAnswers?
    /// The causal tokens of the step's answers, merged.
    var token = CausalToken.empty
    /// By account, whether any request of the step's bind or move of it failed.
    var bindingsFailed: [Int: Bool] = [:]

    init(step: PlannedStep, registrationUnits: [LoadUnit], sent: UInt64, framesLeft: Int) {
        self.step = step
        self.registrationUnits = registrationUnits
        self.sent = sent
        self.framesLeft = framesLeft
    }
}
