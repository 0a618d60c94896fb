import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Forgets as a node decides them (``NodeState/decideForget(_:wallMillis:operations:access:)``):
/// who may forget what, what is logged, and how every later request about the device answers.
@Suite struct ForgetRequestTests {
    let helper = AccountRequestTests()

    func forget(_ device: String) -> ClientBody { .forget(deviceID: device) }

    func forgetResult(_ answer: AccountRequestTests.Answer) -> ForgetResultMessage? {
        if case .forgetResult(let result) = answer.body { return result }
        Issue.record("not a forget result: \(answer.body)")
        return nil
    }

    @Test func aForgottenDeviceAndItsAliasAnswerGoneAndItsIdentifierMakesANewDevice() throws {
        var node = try helper.node()
        let idfv = helper.idfvs[0]
        let keychain = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        let phone = helper.device(&node, "com.acme.mail", idfv: idfv)
        guard case .registerResult(let other) = helper.ask(&node, .register(RegisterRequest(bundleID: "com.acme.mail", keychain: keychain))).body,
            case .registerResult(let merged) = helper.ask(&node, .register(RegisterRequest(bundleID: "com.acme.news", keychain: keychain, idfv: idfv))).body
        else { Issue.record("registrations failed"); return }
        let alias = [phone, other.deviceID].first { $0 != merged.deviceID }!
        _ = helper.ask(&node, helper.bind("alice", phone))

        let answer = helper.ask(&node, forget(alias))
        let result = try #require(forgetResult(answer))
        #expect(result.deviceID == merged.deviceID && result.aliasIDs == [alias] && result.vendor == "com.acme" && !result.alreadyGone)
        guard case .forget(let op) = answer.logged.first?.operation, answer.logged.count == 1 else { Issue.record("no forget logged"); return }
        #expect(op.device.description == merged.deviceID)

        for id in [phone, other.deviceID] {
            #expect(helper.errorCode(helper.ask(&node, .resolve(deviceID: id))) == .gone)
            #expect(helper.errorCode(helper.ask(&node, helper.bind("bob", id))) == .gone)
            #expect(helper.errorCode(helper.ask(&node, .account(AccountQuery(scope: .vendor("com.acme"), subject: .device(id))))) == .gone)
        }
        #expect(helper.errorCode(helper.ask(&node, .lookup(LookupRequest(scope: .vendor("com.acme"), identifier: PresentedIdentifier(rawKind: 2, text: idfv))))) == .notFound)
        guard case .accounts(let accounts) = helper.ask(&node, .account(AccountQuery(scope: .vendor("com.acme"), subject: .account("alice")))).body else {
            Issue.record("no accounts answer"); return
        }
        #expect(accounts.isEmpty, "the forgotten device's binding is removed")

        // Again: answered as gone already, nothing logged.
        let again = helper.ask(&node, forget(phone))
        #expect(forgetResult(again)?.alreadyGone == true && again.logged.isEmpty)

        // The app registers again: a new device, under a new ID, found by its identifier.
        guard case .registerResult(let fresh) = helper.ask(&node, .register(RegisterRequest(bundleID: "com.acme.mail", idfv: idfv))).body else {
            Issue.record("re-registration failed"); return
        }
        #expect(fresh.created && ![phone, other.deviceID].contains(fresh.deviceID))
        guard case .device(let found) = helper.ask(&node, .lookup(LookupRequest(scope: .vendor("com.acme"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))).body
        else { Issue.record("lookup failed"); return }
        #expect(found.deviceID == fresh.deviceID)
    }

    /// A device the node knows only from a forget (its registration has not arrived) has no
    /// vendor here: only a caller that reaches every vendor is told it is gone.
    @Test func aDeviceKnownOnlyAsForgottenIsGoneOnlyToWhoReachesEveryVendor() throws {
        var node = try helper.node()
        let id = DeviceID(UUID128(high: 0x1234, low: 0x5678))
        node.registry.apply(ForgetOp(device: id, vendor: Vendor(trusted: "com.acme")))
        let scoped = ConnectionAccess.token(AccessToken(subject: "s", vendors: .only(["com.acme"]), roles: [.register, .read], expiresAt: .max))
        let everyVendor = ConnectionAccess.token(AccessToken(subject: "o", vendors: .all, roles: [.read, .admin], expiresAt: .max))
        #expect(helper.errorCode(helper.ask(&node, .resolve(deviceID: id.description), access: scoped)) == .notFound)
        #expect(helper.errorCode(helper.ask(&node, forget(id.description), access: scoped)) == .notFound)
        #expect(helper.errorCode(helper.ask(&node, .resolve(deviceID: id.description), access: everyVendor)) == .gone)
        #expect(helper.errorCode(helper.ask(&node, forget(id.description), access: everyVendor)) == .gone)
    }

    /// A node holding a forget of a device it has not received refuses new devices of that
    /// vendor, retryably; returning ones that claim nothing new, and other vendors', are served,
    /// and once the device arrives the new one is made (`ForgetTests` shows why).
    @Test func aNewDeviceWaitsRetryablyForAForgottenDeviceThatHasNotArrived() throws {
        var node = try helper.node()
        let id = DeviceID(UUID128(high: 0x1234, low: 0x5678))
        let known = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[0])
        node.registry.apply(ForgetOp(device: id, vendor: Vendor(trusted: "com.acme")))
        let fresh = RegisterRequest(bundleID: "com.acme.mail", idfv: helper.idfvs[1])
        let single = helper.ask(&node, .register(fresh))
        guard case .error(let error) = single.body else { return #expect(Bool(false), "\(single.body)") }
        #expect(error.code == .notCaughtUp && error.retryable && error.message.contains("forget of a device it has not received yet"), "\(error)")
        #expect(!error.message.contains(id.description), "the refusal names no device")
        #expect(single.logged.isEmpty)
        let batch = helper.ask(&node, .registerBatch([fresh, RegisterRequest(bundleID: "com.acme.mail", idfv: helper.idfvs[0])]))
        guard case .registerBatchResult(let items) = batch.body, items.count == 2 else { return #expect(Bool(false), "\(batch.body)") }
        guard case .error(let itemError) = items[0], case .result(let returning) = items[1] else { return #expect(Bool(false), "\(items)") }
        #expect(itemError.code == .notCaughtUp && itemError.retryable)
        #expect(returning.deviceID == known)
        #expect(helper.device(&node, "com.other.app", idfv: helper.idfvs[1]) != "", "another vendor's new device is served")
        // The forgotten device arrives: the new device is made.
        node.registry.apply(
            .registration(
                RegistrationOp(
                    device: DeviceRef(id: id, created: HLCTimestamp(rawValue: 1 << 16), origin: NodeID(trusted: "node-z"), vendor: Vendor(trusted: "com.acme")),
                    bundle: try BundleID(parsing: "com.acme.mail"), claims: [], merged: [], seen: HLCTimestamp(rawValue: 1 << 16))))
        guard case .registerResult(let made) = helper.ask(&node, .register(fresh)).body else { return #expect(Bool(false)) }
        #expect(made.created)
    }

    @Test func forgettingNeedsAdminOrRegisterOnTheVendorAndRefusesBadIDsWithoutChangingAnything() throws {
        var node = try helper.node()
        let phone = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[0])
        let readOnly = ConnectionAccess.token(AccessToken(subject: "r", vendors: .only(["com.acme"]), roles: [.read], expiresAt: .max))
        let elsewhere = ConnectionAccess.token(AccessToken(subject: "e", vendors: .only(["com.other"]), roles: [.register, .read], expiresAt: .max))
        let register = ConnectionAccess.token(AccessToken(subject: "s", vendors: .only(["com.acme"]), roles: [.register], expiresAt: .max))
        let admin = ConnectionAccess.token(AccessToken(subject: "a", vendors: .all, roles: [.admin], expiresAt: .max))

        let denied = helper.ask(&node, forget(phone), access: readOnly)
        #expect(helper.errorCode(denied) == .permissionDenied && denied.logged.isEmpty)
        let hidden = helper.ask(&node, forget(phone), access: elsewhere)
        #expect(helper.errorCode(hidden) == .notFound && hidden.logged.isEmpty, "another vendor's device is not revealed")
        let unknown = helper.ask(&node, forget("11111111-2222-4333-8444-555555555555"))
        #expect(helper.errorCode(unknown) == .notFound && unknown.logged.isEmpty)
        let malformed = helper.ask(&node, forget("not-a-uuid"))
        #expect(helper.errorCode(malformed) == .invalidDeviceID && malformed.logged.isEmpty)
        #expect(!node.registry.isGone(try DeviceID(parsing: phone)))

        #expect(forgetResult(helper.ask(&node, forget(phone), access: register))?.alreadyGone == false)
        let tablet = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[1])
        // An admin token limited to another vendor forgets nothing of this one, and does not learn
        // that the device exists.
        let otherAdmin = ConnectionAccess.token(AccessToken(subject: "o", vendors: .only(["com.other"]), roles: [.admin], expiresAt: .max))
        let refused = helper.ask(&node, forget(tablet), access: otherAdmin)
        #expect(helper.errorCode(refused) == .notFound && refused.logged.isEmpty)
        let acmeAdmin = ConnectionAccess.token(AccessToken(subject: "c", vendors: .only(["com.acme"]), roles: [.admin], expiresAt: .max))
        let other = helper.device(&node, "com.acme.mail", idfv: helper.idfvs[2])
        #expect(forgetResult(helper.ask(&node, forget(other), access: acmeAdmin))?.alreadyGone == false)
        #expect(forgetResult(helper.ask(&node, forget(tablet), access: admin))?.alreadyGone == false)
        #expect(node.registry.tombstoneCount == 3)
    }
}
