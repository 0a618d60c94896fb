import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Vendor rule requests as a node decides them (``NodeState/decideVendor(_:wallMillis:operations:)``),
/// and the seed of a first start.
@Suite struct VendorRequestTests {
    let helper = AccountRequestTests()

    func rules(_ answer: AccountRequestTests.Answer) -> [VendorRuleMessage]? {
        if case .vendorRules(let rules) = answer.body { return rules.rules }
        Issue.record("not vendor rules: \(answer.body)")
        return nil
    }

    func error(_ answer: AccountRequestTests.Answer) -> WireError? {
        if case .error(let error) = answer.body { return error }
        return nil
    }

    @Test func aFirstStartSeedsTheFilesRulesOnceAndOperatorChangesTakeEffectAtOnce() throws {
        var node = try helper.node()
        var operations = [LoggedOperation]()
        #expect(node.seedVendorRules(wallMillis: 1_000, operations: &operations))
        #expect(operations.count == 2 && operations.allSatisfy { if case .vendorRule(let c) = $0.operation { c.kind == .seed } else { false } })
        #expect(!node.seedVendorRules(wallMillis: 1_000, operations: &operations), "seeded once")
        let seeded = node.rulesVersion
        #expect(rules(helper.ask(&node, .vendor(.list)))?.map(\.name) == ["com.fresh", "com.many"])

        let added = helper.ask(&node, .vendor(.add(VendorRuleMessage(name: "acme", prefixes: ["com.acme", "net.acmecdn"], maxDevices: 3))))
        #expect(rules(added)?.map(\.name) == ["acme", "com.fresh", "com.many"] && added.logged.count == 1)
        let player = try BundleID(parsing: "net.acmecdn.player")
        #expect(node.rulesVersion > seeded && node.rules.vendor(of: player).name == "acme")
        #expect(node.rules.bindingPolicy(of: Vendor(trusted: "acme")).maxDevices == 3)
        // Two sibling apps of the new vendor's two prefixes are one device.
        let first = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[0])
        #expect(helper.device(&node, "net.acmecdn.player", idfv: helper.idfvs[0]) == first)

        let changed = helper.ask(&node, .vendor(.set(VendorRuleMessage(name: "com.fresh", prefixes: ["com.fresh", "org.fresh"]))))
        #expect(rules(changed)?.first { $0.name == "com.fresh" }?.prefixes == ["com.fresh", "org.fresh"])
        let removed = helper.ask(&node, .vendor(.remove(name: "com.many")))
        #expect(rules(removed)?.map(\.name) == ["acme", "com.fresh"])
        #expect(node.registry.vendorRuleHistory.changes.count == 5)
    }

    @Test func aChangeThatWouldMoveRegisteredDevicesOrBreaksTheRulesIsRefusedAndChangesNothing() throws {
        var node = try helper.node()
        var operations = [LoggedOperation]()
        _ = node.seedVendorRules(wallMillis: 1_000, operations: &operations)
        _ = helper.ask(&node, .vendor(.add(VendorRuleMessage(name: "acme", prefixes: ["com.acme", "net.acmecdn"]))))
        let device = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[0])
        #expect(helper.device(&node, "net.acmecdn.player", idfv: helper.idfvs[0]) == device)
        _ = helper.device(&node, "net.acmecdn.tv", idfv: helper.idfvs[1])
        let version = node.rulesVersion
        let cases: [(VendorRequestMessage, ErrorCode, String)] = [
            (.remove(name: "acme"), .invalidArgument, "would move 2 registered devices"),
            (.set(VendorRuleMessage(name: "acme", prefixes: ["com.acme"])), .invalidArgument, "would move 2 registered devices"),
            (.add(VendorRuleMessage(name: "grab", prefixes: ["net.acmecdn.player"])), .invalidArgument, "1 registered device to another vendor, through bundle net.acmecdn.player (to grab)"),
            (.add(VendorRuleMessage(name: "com.fresh", prefixes: ["com.fresh"])), .invalidArgument, "has a rule already"),
            (.set(VendorRuleMessage(name: "nobody", prefixes: ["com.nobody"])), .notFound, "no vendor rule nobody"),
            (.remove(name: "nobody"), .notFound, "no vendor rule nobody"),
            (.add(VendorRuleMessage(name: "twice", prefixes: ["com.fresh"])), .invalidArgument, "belongs to both"),
            (.add(VendorRuleMessage(name: "short", prefixes: ["com"])), .invalidArgument, "prefix"),
            (.add(VendorRuleMessage(name: "Bad Name!", prefixes: ["com.bad"])), .invalidArgument, "may hold only letters"),
            (.add(VendorRuleMessage(name: "big", prefixes: ["com.big"], maxDevices: 1_001)), .invalidArgument, "1 to 1000"),
            (.unspecified, .invalidArgument, "names no action"),
        ]
        for (request, code, text) in cases {
            let answer = helper.ask(&node, .vendor(request))
            let refusal = error(answer)
            #expect(refusal?.code == code && refusal?.message.contains(text) == true, "\(request): \(answer.body)")
            #expect(answer.logged.isEmpty)
        }
        #expect(node.rulesVersion == version && node.registry.vendorRuleHistory.changes.count == 3)
        // A rule named as the default scope of its bundles moves nothing when it goes.
        _ = helper.device(&node, "com.many.app", idfv: helper.idfvs[2])
        #expect(rules(helper.ask(&node, .vendor(.remove(name: "com.many"))))?.map(\.name) == ["acme", "com.fresh"])
        // Once the devices are forgotten, nothing moves: the rule may go.
        for idfv in helper.idfvs.prefix(2) {
            guard case .device(let record) = helper.ask(&node, .lookup(LookupRequest(scope: .vendor("acme"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))).body
            else { Issue.record("lookup failed"); return }
            _ = helper.ask(&node, .forget(deviceID: record.deviceID))
        }
        #expect(rules(helper.ask(&node, .vendor(.remove(name: "acme"))))?.map(\.name) == ["com.fresh"])
    }

    @Test func aChangeAskedToMoveJoinsWholeVendorsIntoTheOneTheirDevicesGoTo() throws {
        var node = try helper.node()
        let corp = helper.device(&node, "com.acmecorp.app", idfv: helper.idfvs[0])
        let mail = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[0])
        #expect(corp != mail, "two default vendors: two devices")
        _ = helper.ask(&node, helper.bind("alice", corp, "com.acmecorp"))
        let acme = VendorRuleMessage(name: "acme", prefixes: ["com.acme", "com.acmecorp"])
        let unasked = helper.ask(&node, .vendor(.add(acme)))
        #expect(error(unasked)?.message.contains("would move 2 registered devices") == true && error(unasked)?.message.contains("--move") == true)
        #expect(unasked.logged.isEmpty)

        let moved = helper.ask(&node, .vendor(.add(acme, move: true)))
        guard case .vendorRules(let answer) = moved.body, case .vendorRule(let change) = moved.logged.first?.operation else {
            Issue.record("not moved: \(moved.body)")
            return
        }
        #expect(answer.aliases.map { "\($0.name)>\($0.filedUnder)" } == ["com.acme>acme", "com.acmecorp>acme"])
        #expect(change.move == VendorMove(from: ["com.acme", "com.acmecorp"], into: "acme") && moved.logged.count == 1)
        // The phone's two devices met in the joined vendor: one device now, whichever app asks.
        guard case .registerResult(let again) = helper.ask(&node, .register(RegisterRequest(bundleID: "com.acme.mail", idfv: helper.idfvs[0]))).body
        else {
            Issue.record("registration failed")
            return
        }
        #expect(again.vendor == "acme" && [corp, mail].contains(again.deviceID) && !again.created)
        // The account bound under the old name is the joined vendor's, by either name.
        for vendor in ["acme", "com.acmecorp"] {
            guard case .accounts(let accounts) = helper.ask(&node, .account(AccountQuery(scope: .vendor(vendor), subject: .account("alice")))).body
            else {
                Issue.record("no account answer for \(vendor)")
                continue
            }
            #expect(accounts.first?.vendor == "acme" && accounts.first?.bound.map(\.deviceID) == [corp], "\(vendor): \(accounts)")
        }

        // A move takes whole vendors into one: acme's devices would part, refused even when asked.
        let cases: [VendorRequestMessage] = [
            .set(VendorRuleMessage(name: "acme", prefixes: ["com.acme"]), move: true),
            .remove(name: "acme", move: true),
        ]
        for request in cases {
            let answer = helper.ask(&node, .vendor(request))
            #expect(error(answer)?.message.contains("a move takes a vendor's devices whole") == true, "\(request): \(answer.body)")
            #expect(answer.logged.isEmpty)
        }
    }

    @Test func aChangeMovesOnlyTheDevicesOfTheBundlesItTouches() throws {
        var node = try helper.node()
        _ = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[0])
        // com.acme, holding only com.acme.mail, joins the new vendor mail; a bundle com.acme names
        // by default is mail's from then on.
        let mail = helper.ask(&node, .vendor(.add(VendorRuleMessage(name: "mail", prefixes: ["com.acme.mail"]), move: true)))
        #expect(error(mail) == nil && mail.logged.count == 1, "\(mail.body)")
        guard case .registerResult(let chat) = helper.ask(&node, .register(RegisterRequest(bundleID: "com.acme.chat", idfv: helper.idfvs[1]))).body
        else {
            Issue.record("registration failed")
            return
        }
        #expect(chat.vendor == "mail")
        // A change of another vendor moves nothing, though com.acme.chat's named vendor is an alias.
        let zeta = helper.ask(&node, .vendor(.add(VendorRuleMessage(name: "zeta", prefixes: ["io.zeta"]))))
        #expect(error(zeta) == nil && zeta.logged.count == 1, "\(zeta.body)")

        // A device a peer filed under com.x, not having heard of rule x yet: a change of x's rule
        // moves it (asked), though x's prefixes stay as they were.
        _ = helper.ask(&node, .vendor(.add(VendorRuleMessage(name: "x", prefixes: ["com.x"]))))
        let time = HLCTimestamp(millis: 900, counter: 0)
        let stray = DeviceID(UUID128(high: 0x5747, low: 1))
        node.registry.apply(
            .registration(
                RegistrationOp(
                    device: DeviceRef(id: stray, created: time, origin: NodeID(trusted: "node-b"), vendor: Vendor(trusted: "com.x")),
                    bundle: try BundleID(parsing: "com.x.app"), claims: [Identifier(kind: .idfv, value: UUID128(high: 0x5747, low: 2))], merged: [],
                    seen: time)))
        let policy = VendorRuleMessage(name: "x", prefixes: ["com.x"], maxDevices: 2)
        #expect(error(helper.ask(&node, .vendor(.set(policy))))?.message.contains("would move 1 registered device") == true)
        #expect(error(helper.ask(&node, .vendor(.set(policy, move: true)))) == nil)
        #expect(node.registry.vendor(of: stray)?.name == "x")
    }

    @Test func changingTheRulesNeedsAdminAndListingDoesNot() throws {
        var node = try helper.node()
        let register = ConnectionAccess.token(AccessToken(subject: "s", vendors: .all, roles: [.register, .read], expiresAt: .max))
        let admin = ConnectionAccess.token(AccessToken(subject: "a", vendors: .all, roles: [.admin], expiresAt: .max))
        let request = ClientBody.vendor(.add(VendorRuleMessage(name: "acme", prefixes: ["com.acme"])))
        #expect(error(helper.ask(&node, request, access: register))?.code == .permissionDenied)
        #expect(rules(helper.ask(&node, .vendor(.list), access: register)) != nil)
        // Admin on some vendors only: a rule change could move any vendor's devices into one it
        // reaches, so it is refused.
        let scopedAdmin = ConnectionAccess.token(AccessToken(subject: "o", vendors: .only(["com.other"]), roles: [.admin], expiresAt: .max))
        let joining = ClientBody.vendor(.set(VendorRuleMessage(name: "com.other", prefixes: ["com.other", "com.acme"]), move: true))
        let refused = helper.ask(&node, joining, access: scopedAdmin)
        #expect(error(refused)?.code == .permissionDenied && refused.logged.isEmpty)
        #expect(rules(helper.ask(&node, request, access: admin))?.map(\.name).contains("acme") == true)
    }
}
