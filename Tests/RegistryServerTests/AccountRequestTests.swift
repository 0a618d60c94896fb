import Crypto
import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Binds, unbinds and account queries as a node decides them (``NodeState``): what each answers,
/// what it logs, and the bad inputs it refuses without changing anything.
@Suite struct AccountRequestTests {
    /// Vendor `com.acme` (default policy: one device, reject), `com.many` (two devices, replace)
    /// and `com.fresh` (one device active within a day, reject).
    func node() throws -> NodeState {
        let rules = try VendorRules(rules: [
            VendorRule(name: nil, prefixes: ["com.many"], binding: try BindingPolicy(maxDevices: 2, pastLimit: .replace)),
            VendorRule(name: nil, prefixes: ["com.fresh"], binding: try BindingPolicy(maxDevices: 1, activeWithinDays: 1)),
        ])
        return NodeState(
            clock: HybridLogicalClock(), nodeID: NodeID(trusted: "node-a"), epoch: 1, nextSequence: 1, rules: rules, limits: .default,
            identifierKey: IdentifierKey(secret: "account tests"))
    }

    struct Answer {
        let body: ServerBody
        let logged: [LoggedOperation]
    }

    func ask(_ node: inout NodeState, _ body: ClientBody, access: ConnectionAccess = .unrestricted, wallMillis: UInt64 = 1_000) -> Answer {
        var resolver = BundleResolver(rules: node.rules, capacity: 0)
        let prepared = access.prepare(body, resolver: &resolver, limits: node.limits, identifierKey: node.identifierKey)
        var generator = SplitMix64(seed: 7)
        var operations = [LoggedOperation]()
        let body = node.decide(prepared, requestID: 1, wallMillis: wallMillis, generator: &generator, operations: &operations, access: access).body
        return Answer(body: body, logged: operations)
    }

    /// Registers a new device of `bundle`'s vendor; its ID.
    func device(_ node: inout NodeState, _ bundle: String, idfv: String) -> String {
        guard case .registerResult(let result) = ask(&node, .register(RegisterRequest(bundleID: bundle, idfv: idfv))).body else {
            Issue.record("registration failed")
            return ""
        }
        return result.deviceID
    }

    func bind(_ account: String, _ device: String, _ vendor: String = "com.acme") -> ClientBody {
        .bind(BindingRequest(scope: .vendor(vendor), account: account, deviceID: device))
    }

    func unbind(_ account: String, _ device: String, _ vendor: String = "com.acme") -> ClientBody {
        .unbind(BindingRequest(scope: .vendor(vendor), account: account, deviceID: device))
    }

    func result(_ answer: Answer) -> BindResultMessage? {
        if case .bindResult(let result) = answer.body { return result }
        Issue.record("not a bind result: \(answer.body)")
        return nil
    }

    func errorCode(_ answer: Answer) -> ErrorCode? {
        if case .error(let error) = answer.body { return error.code }
        return nil
    }

    let idfvs = (1...6).map { "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b9\($0)" }

    @Test func theDefaultPolicyRejectsASecondDeviceAndNamesTheBoundOne() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        let tablet = device(&state, "com.acme.mail", idfv: idfvs[1])
        let first = ask(&state, bind("alice", phone))
        #expect(result(first)?.outcome == .bound)
        #expect(first.logged.count == 1)
        guard case .binding(let change) = first.logged.first?.operation else { return #expect(Bool(false)) }
        #expect(change.kind == .bind && change.device.description == phone && change.time == first.logged[0].timestamp)
        let again = ask(&state, bind("alice", phone))
        #expect(result(again)?.outcome == .alreadyBound)
        #expect(again.logged.count == 1, "a bind of a bound device marks it active, so it is logged")
        let refused = ask(&state, bind("alice", tablet))
        #expect(result(refused)?.outcome == .rejected)
        #expect(result(refused)?.account?.bound.map(\.deviceID) == [phone])
        #expect(refused.logged.isEmpty, "a rejected bind changes nothing")
        // Unbinding the phone makes room.
        #expect(result(ask(&state, unbind("alice", phone)))?.outcome == .unbound)
        let moved = ask(&state, bind("alice", tablet))
        #expect(result(moved)?.outcome == .bound)
        #expect(result(moved)?.account?.bound.map(\.deviceID) == [tablet])
        #expect(result(moved)?.account?.unbound.map(\.deviceID) == [phone])
        #expect(result(moved)?.account?.unbound.first?.reason == .unbound)
    }

    @Test func anUnbindOfNothingBoundIsAnsweredAsSuchAndLogsNothing() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        let answer = ask(&state, unbind("alice", phone))
        #expect(result(answer)?.outcome == .notBound)
        #expect(answer.logged.isEmpty)
    }

    @Test func theReplacePolicyUnbindsTheLeastRecentlyActiveDevice() throws {
        var state = try node()
        let devices = (0..<3).map { device(&state, "com.many.app", idfv: idfvs[$0]) }
        #expect(result(ask(&state, bind("bob", devices[0], "com.many")))?.outcome == .bound)
        #expect(result(ask(&state, bind("bob", devices[1], "com.many")))?.outcome == .bound)
        // Device 0 is used again: device 1 is now the least recently active.
        #expect(result(ask(&state, bind("bob", devices[0], "com.many")))?.outcome == .alreadyBound)
        let third = ask(&state, bind("bob", devices[2], "com.many"))
        #expect(result(third)?.outcome == .bound)
        #expect(result(third)?.replacedDeviceID == devices[1])
        #expect(result(third)?.account?.bound.map(\.deviceID) == [devices[0], devices[2]].sorted())
        #expect(result(third)?.account?.unbound.first?.reason == .replaced)
        #expect(result(third)?.account?.unbound.first?.replacedBy == devices[2])
    }

    @Test func aDeviceOutsideTheActivityWindowTakesNoPlace() throws {
        var state = try node()
        let old = device(&state, "com.fresh.app", idfv: idfvs[0])
        let new = device(&state, "com.fresh.app", idfv: idfvs[1])
        #expect(result(ask(&state, bind("carol", old, "com.fresh"), wallMillis: 1_000))?.outcome == .bound)
        // Within the day the limit holds; two days later the old device counts no more.
        #expect(result(ask(&state, bind("carol", new, "com.fresh"), wallMillis: 3_600_000))?.outcome == .rejected)
        let later = ask(&state, bind("carol", new, "com.fresh"), wallMillis: 2 * 86_400_000)
        #expect(result(later)?.outcome == .bound)
        #expect(Set(result(later)?.account?.bound.map(\.deviceID) ?? []) == [old, new])
    }

    @Test func accountsAreFoundByNameByKeyAndByDevice() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        let bound = result(ask(&state, bind("alice", phone)))
        let key = try #require(bound?.account?.accountKey)
        _ = ask(&state, bind("dave", phone))
        func accounts(_ subject: AccountQuery.Subject, _ scope: LookupRequest.Scope = .bundle("com.acme.mail")) -> [AccountBindingsMessage]? {
            if case .accounts(let accounts) = ask(&state, .account(AccountQuery(scope: scope, subject: subject))).body { return accounts }
            return nil
        }
        #expect(accounts(.account("alice"))?.map(\.accountKey) == [key])
        #expect(accounts(.accountKey(key))?.first?.bound.map(\.deviceID) == [phone])
        #expect(accounts(.accountKey(key.uppercased()))?.map(\.accountKey) == [key])
        #expect(accounts(.device(phone))?.count == 2)
        #expect(accounts(.account("nobody")) == [])
        // The key is docs/security.md's keyed hash, computed here from the formula: HMAC-SHA256
        // under the identifier key (itself HMAC-SHA256 of a label under the cluster secret) of
        // "account:" and the name, its first 16 bytes. Another secret gives another key.
        let identifierKey = HMAC<SHA256>.authenticationCode(
            for: Array("registry identifier key v1".utf8), using: SymmetricKey(data: Array("account tests".utf8)))
        let mac = HMAC<SHA256>.authenticationCode(for: Array("account:alice".utf8), using: SymmetricKey(data: Array(identifierKey)))
        #expect(UUID128(bytes: Array(mac).prefix(16))?.text == key)
        #expect(IdentifierKey(secret: "other").seal(try AccountName(validating: "alice")).text != key)
    }

    /// A read names a vendor by text; a node keeps every name it makes for good
    /// (``InternedText``), so a read of a vendor it never held must make no name: it answers
    /// as for a vendor holding nothing, and the names stay unmade.
    @Test func readsOfAVendorNeverHeldAnswerNothingAndMakeNoName() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        // Unique to this run, so that no other test in the process made them.
        let vendor = "com.never-held-\(UInt64.random(in: 1 ... .max))"
        let bundle = "\(vendor).app"
        let idfv = PresentedIdentifier(rawKind: IdentifierKind.idfv.rawValue, text: idfvs[1])
        func accounts(_ subject: AccountQuery.Subject, _ scope: LookupRequest.Scope) -> [AccountBindingsMessage]? {
            if case .accounts(let accounts) = ask(&state, .account(AccountQuery(scope: scope, subject: subject))).body { return accounts }
            return nil
        }
        for scope in [LookupRequest.Scope.vendor(vendor), .bundle(bundle), .vendor(vendor.uppercased())] {
            #expect(errorCode(ask(&state, .lookup(LookupRequest(scope: scope, identifier: idfv)))) == .notFound)
            #expect(accounts(.account("alice"), scope) == [])
            #expect(accounts(.accountKey(UUID128(high: 1, low: 2).text), scope) == [])
            #expect(errorCode(ask(&state, .account(AccountQuery(scope: scope, subject: .device(phone))))) == .notFound)
            // Bad inputs are still refused first.
            #expect(errorCode(ask(&state, .account(AccountQuery(scope: scope, subject: .accountKey("nope"))))) == .invalidArgument)
        }
        for text in [vendor, bundle] {
            if case .clones(let clones) = ask(&state, .clones(vendor: text)).body {
                #expect(clones.isEmpty)
            } else {
                Issue.record("the clones of \(text) were not listed")
            }
        }
        #expect(InternedText.existing(vendor) == nil)
        #expect(InternedText.existing(bundle) == nil)
        // Once a device of the vendor registers, the same reads find it.
        let held = device(&state, bundle, idfv: idfvs[1])
        #expect(InternedText.existing(vendor) != nil)
        guard case .device(let found) = ask(&state, .lookup(LookupRequest(scope: .vendor(vendor), identifier: idfv))).body else {
            Issue.record("the device of \(vendor) was not found")
            return
        }
        #expect(found.deviceID == held)
    }

    @Test func badInputsGetTypedErrorsAndChangeNothing() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        let other = device(&state, "com.other.app", idfv: idfvs[1])
        let cases: [(ClientBody, ErrorCode)] = [
            (bind("", phone), .invalidArgument),
            (bind(String(repeating: "x", count: 257), phone), .invalidArgument),
            (bind("a\u{0}b", phone), .invalidArgument),
            (bind("alice", "not-a-device"), .invalidDeviceID),
            (bind("alice", "01890000-0000-7000-8000-000000000000"), .notFound),
            (bind("alice", other), .notFound),
            (bind("alice", phone, "Not A Vendor!"), .invalidArgument),
            (.bind(BindingRequest(scope: .unspecified, account: "alice", deviceID: phone)), .invalidArgument),
            (.bind(BindingRequest(scope: .bundle("bad"), account: "alice", deviceID: phone)), .invalidBundleID),
            (.account(AccountQuery(scope: .vendor("com.acme"), subject: .unspecified)), .invalidArgument),
            (.account(AccountQuery(scope: .vendor("com.acme"), subject: .accountKey("nope"))), .invalidArgument),
            (.account(AccountQuery(scope: .vendor("com.acme"), subject: .device(other))), .notFound),
        ]
        for (body, code) in cases {
            let answer = ask(&state, body)
            #expect(errorCode(answer) == code, "\(body)")
            #expect(answer.logged.isEmpty)
        }
        #expect(state.registry.bindingChangeCount == 0)
        // 256 bytes is still an account.
        #expect(result(ask(&state, bind(String(repeating: "é", count: 128), phone)))?.outcome == .bound)
    }

    @Test func bindsNeedRegisterOnTheVendorOrAdmin() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        let register = ConnectionAccess.token(AccessToken(subject: "s", vendors: .only(["com.acme"]), roles: [.register], expiresAt: .max))
        let readOnly = ConnectionAccess.token(AccessToken(subject: "r", vendors: .only(["com.acme"]), roles: [.read], expiresAt: .max))
        let elsewhere = ConnectionAccess.token(AccessToken(subject: "e", vendors: .only(["com.other"]), roles: [.register, .read], expiresAt: .max))
        let admin = ConnectionAccess.token(AccessToken(subject: "a", vendors: .all, roles: [.admin], expiresAt: .max))
        #expect(errorCode(ask(&state, bind("alice", phone), access: readOnly)) == .permissionDenied)
        #expect(errorCode(ask(&state, bind("alice", phone), access: elsewhere)) == .permissionDenied)
        #expect(result(ask(&state, bind("alice", phone), access: register))?.outcome == .bound)
        // An admin token limited to another vendor neither unbinds nor binds this vendor's devices.
        let otherAdmin = ConnectionAccess.token(AccessToken(subject: "o", vendors: .only(["com.other"]), roles: [.admin], expiresAt: .max))
        let refusedUnbind = ask(&state, unbind("alice", phone), access: otherAdmin)
        #expect(errorCode(refusedUnbind) == .permissionDenied && refusedUnbind.logged.isEmpty)
        let refusedBind = ask(&state, bind("bob", phone), access: otherAdmin)
        #expect(errorCode(refusedBind) == .permissionDenied && refusedBind.logged.isEmpty)
        let acmeAdmin = ConnectionAccess.token(AccessToken(subject: "c", vendors: .only(["com.acme"]), roles: [.admin], expiresAt: .max))
        #expect(result(ask(&state, bind("carol", phone), access: acmeAdmin))?.outcome == .bound)
        #expect(result(ask(&state, unbind("carol", phone), access: acmeAdmin))?.outcome == .unbound)
        #expect(result(ask(&state, unbind("alice", phone), access: admin))?.outcome == .unbound)
        let query = ClientBody.account(AccountQuery(scope: .vendor("com.acme"), subject: .account("alice")))
        guard case .accounts(let seen) = ask(&state, query, access: readOnly).body else { return #expect(Bool(false)) }
        #expect(seen.first?.unbound.map(\.deviceID) == [phone])
        #expect(errorCode(ask(&state, query, access: elsewhere)) == .permissionDenied)
    }

    /// Two nodes that cannot hear each other each bind the account to a device; once each holds
    /// the other's change, both answer the same devices: the earlier bind keeps its place and the
    /// later one is reported refused.
    @Test func concurrentBindsOnTwoNodesResolveAlikeOnBoth() throws {
        var a = try node()
        var b = NodeState(
            clock: HybridLogicalClock(), nodeID: NodeID(trusted: "node-b"), epoch: 1, nextSequence: 1, rules: a.rules, limits: .default,
            identifierKey: IdentifierKey(secret: "account tests"))
        let registered = [idfvs[0], idfvs[1]].map { ask(&a, .register(RegisterRequest(bundleID: "com.acme.mail", idfv: $0))) }
        guard case .registerResult(let phoneResult) = registered[0].body, case .registerResult(let tabletResult) = registered[1].body else {
            return #expect(Bool(false))
        }
        let (phone, tablet) = (phoneResult.deviceID, tabletResult.deviceID)
        // b learns of both devices.
        for answer in registered { for operation in answer.logged { b.registry.apply(operation.operation) } }
        let onA = ask(&a, bind("alice", phone), wallMillis: 2_000)
        let onB = ask(&b, bind("alice", tablet), wallMillis: 2_001)
        #expect(result(onA)?.outcome == .bound && result(onB)?.outcome == .bound)
        // They hear of each other.
        a.registry.apply(onB.logged[0].operation)
        b.registry.apply(onA.logged[0].operation)
        let query = ClientBody.account(AccountQuery(scope: .vendor("com.acme"), subject: .account("alice")))
        guard case .accounts(let seenByA) = ask(&a, query).body, case .accounts(let seenByB) = ask(&b, query).body else {
            return #expect(Bool(false))
        }
        #expect(seenByA == seenByB)
        #expect(seenByA.first?.bound.map(\.deviceID) == [phone])
        #expect(seenByA.first?.unbound.map(\.deviceID) == [tablet])
        #expect(seenByA.first?.unbound.first?.reason == .refused)
    }

    /// A peer's change stamped ahead of what the node's clock has observed (its log entry carried
    /// an earlier time): a bind moves the clock past it, so that the decided change follows every
    /// change held; past the drift the clock accepts, the bind is refused, retryably, and logs
    /// nothing.
    @Test func aChangeStampedAheadOfTheClockIsPassedOrRefused() throws {
        var state = try node()
        let phone = device(&state, "com.acme.mail", idfv: idfvs[0])
        let account = state.identifierKey.seal(try AccountName(validating: "alice"))
        func stamped(_ millis: UInt64) throws -> BindingChange {
            BindingChange(
                kind: .unbind, vendor: Vendor(trusted: "com.acme"), account: account, device: try DeviceID(parsing: phone),
                time: HLCTimestamp(millis: millis, counter: 0), origin: NodeID(trusted: "node-b"))
        }
        let ahead = try stamped(31_000)
        state.registry.apply(ahead)
        let answer = ask(&state, bind("alice", phone), wallMillis: 1_000)
        #expect(result(answer)?.outcome == .bound)
        #expect(answer.logged.count == 1 && answer.logged[0].timestamp > ahead.time)
        state.registry.apply(try stamped(10_000_000))
        let refused = ask(&state, bind("alice", phone), wallMillis: 1_000)
        #expect(errorCode(refused) == .clockSkew && refused.logged.isEmpty)
    }
}
