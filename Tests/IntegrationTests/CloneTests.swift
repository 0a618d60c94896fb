import Foundation
import RegistryTestSupport
import Testing

/// Keychains cloned onto a second phone, against a real `registryd`: a vendor's policy set with
/// `registryctl vendor add`, the marks listed by `registryctl device clones`, the `split` event
/// on `registryctl watch`, and both kept across a restart from the journal and from a snapshot.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CloneIntegrationTests {
    func ctl(_ arguments: [String], endpoint: String) throws -> CommandResult {
        try run(Binaries.path("registryctl"), arguments, environment: ["REGISTRY_ENDPOINT": endpoint])
    }

    func json(_ result: CommandResult) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return try #require(object as? [String: Any], "\(result.stdout) \(result.stderr)")
    }

    func register(_ bundle: String, keychain: String, idfv: String, at endpoint: String) throws -> String {
        let answer = try json(try ctl(["register", "--bundle", bundle, "--keychain", keychain, "--idfv", idfv, "-o", "json"], endpoint: endpoint))
        return try #require(answer["deviceId"] as? String, "\(answer)")
    }

    func clones(_ arguments: [String] = [], at endpoint: String) throws -> [[String: Any]] {
        let result = try ctl(["device", "clones", "-o", "json"] + arguments, endpoint: endpoint)
        #expect(result.status == 0, "\(result.stderr)")
        return try #require(try json(result)["clones"] as? [[String: Any]], "\(result.stdout)")
    }

    @Test func aSplitVendorAndAFlagVendorMarkTheirClonesAndKeepThemAcrossRestarts() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--cluster-id", "clones"])
        defer { node.stop() }
        var endpoint = node.endpoint

        let added = try ctl(["vendor", "add", "--name", "acme", "--prefix", "com.acme", "--clones", "split", "--clone-window-days", "3", "-o", "json"], endpoint: endpoint)
        #expect(added.status == 0, "\(added.stderr)")
        let rule = try #require((try json(added)["rules"] as? [[String: Any]])?.first { $0["name"] as? String == "acme" })
        #expect(rule["clones"] as? String == "split" && rule["cloneWindowDays"] as? Int == 3, "\(rule)")
        let refused = try ctl(["vendor", "add", "--name", "bad", "--prefix", "com.bad", "--clone-window-days", "0"], endpoint: endpoint)
        #expect(refused.status == 64 && refused.stderr.contains("--clone-window-days must be 1 to 3650"), "\(refused.stderr)")

        // A watch for splits, in the background.
        let watch = try BackgroundWatch(["--endpoint", endpoint, "-o", "json", "--progress", "--kind", "split", "--kind", "clone_suspected", "--count", "2"])

        // acme: the old phone, the restored one, the old one again.
        let keychain = "AAAAAAAA-1111-4111-8111-111111111111"
        let (oldIDFV, newIDFV) = ("BBBBBBBB-1111-4111-8111-111111111111", "CCCCCCCC-1111-4111-8111-111111111111")
        let device = try register("com.acme.mail", keychain: keychain, idfv: oldIDFV, at: endpoint)
        #expect(try register("com.acme.maps", keychain: keychain, idfv: newIDFV, at: endpoint) == device)
        #expect(try register("com.acme.maps", keychain: keychain, idfv: oldIDFV, at: endpoint) == device)
        let newDevice = try register("com.acme.mail", keychain: keychain, idfv: newIDFV, at: endpoint)
        #expect(newDevice != device, "the restored phone has a device of its own after the split")

        // com.flag (no rule: the default, flag): marked, and both phones keep one device.
        let flagKeychain = "DDDDDDDD-1111-4111-8111-111111111111"
        let flagged = try register("com.flag.app", keychain: flagKeychain, idfv: "EEEEEEEE-1111-4111-8111-111111111111", at: endpoint)
        _ = try register("com.flag.app", keychain: flagKeychain, idfv: "FFFFFFFF-1111-4111-8111-111111111111", at: endpoint)
        _ = try register("com.flag.app", keychain: flagKeychain, idfv: "EEEEEEEE-1111-4111-8111-111111111111", at: endpoint)
        #expect(try register("com.flag.app", keychain: flagKeychain, idfv: "FFFFFFFF-1111-4111-8111-111111111111", at: endpoint) == flagged)

        let lines = watch.finish().lines
        let events = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.filter { $0["kind"] != nil }
        #expect(events.map { $0["kind"] as? String } == ["split", "clone_suspected"], "\(lines)")
        #expect(events.first?["device_id"] as? String == device && events.first?["other_device_ids"] as? [String] == [newDevice], "\(lines)")
        #expect(events.last?["device_id"] as? String == flagged && events.last?["vendor"] as? String == "com.flag", "\(lines)")

        func expectListed(_ when: String) throws {
            let all = try clones(at: endpoint)
            #expect(all.count == 2, "\(when): \(all)")
            let split = try #require(all.first { $0["vendor"] as? String == "acme" }, "\(when)")
            #expect(split["device"] as? String == device && split["action"] as? String == "split" && split["newDevice"] as? String == newDevice, "\(when): \(split)")
            #expect(split["bundle"] as? String == "com.acme.maps", "\(when): the app the old phone registered again from")
            let flag = try #require(all.first { $0["vendor"] as? String == "com.flag" }, "\(when)")
            #expect(flag["device"] as? String == flagged && flag["action"] as? String == "flag" && flag["newDevice"] == nil, "\(when): \(flag)")
            // By vendor name, and by a bundle ID of the vendor.
            #expect(try clones(["--vendor", "acme"], at: endpoint).count == 1)
            #expect(try clones(["--vendor", "com.flag.other"], at: endpoint).map { $0["device"] as? String } == [flagged])
        }
        try expectListed("running")
        let unknown = try ctl(["device", "clones", "--vendor", "no such vendor"], endpoint: endpoint)
        #expect(unknown.status != 0 && unknown.stderr.contains("invalid_argument"), "\(unknown.stderr)")

        // From the journal, then from a snapshot.
        #expect(node.stop() == 0)
        node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--cluster-id", "clones"])
        endpoint = node.endpoint
        try expectListed("after a restart from the journal")
        #expect(try ctl(["snapshot"], endpoint: endpoint).status == 0)
        #expect(node.stop() == 0)
        node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--cluster-id", "clones"])
        endpoint = node.endpoint
        try expectListed("after a restart from a snapshot")
        #expect(try register("com.acme.mail", keychain: keychain, idfv: newIDFV, at: endpoint) == newDevice)
        #expect(try register("com.acme.mail", keychain: keychain, idfv: oldIDFV, at: endpoint) == device)
    }
}
