import RegistryWire
import Testing

@Suite struct HostPortTests {
    @Test(arguments: [
        ("127.0.0.1:7400", "127.0.0.1", 7400),
        ("node-a.registry.svc:1", "node-a.registry.svc", 1),
        ("[::1]:65535", "::1", 65535),
        ("  localhost:7400\t", "localhost", 7400),
    ])
    func readsAddresses(text: String, host: String, port: Int) throws {
        let parsed = try HostPort.parse(text)
        #expect(parsed.host == host && parsed.port == port)
        #expect(try HostPort.parse(HostPort.text(host: parsed.host, port: parsed.port)) == parsed)
    }

    @Test(arguments: [
        ("localhost", HostPort.Problem.noPort),
        ("[::1]7400", .noPort),
        ("::1:7400", .badHost),
        ("[::1:7400", .badHost),
        (":7400", .badHost),
        ("a b:7400", .badHost),
        ("a,b:7400", .badHost),
        ("host:0", .badPort),
        ("host:65536", .badPort),
        ("host:+80", .badPort),
        ("host:", .badPort),
        ("host:７４００", .badPort),
    ])
    func refusesWhatIsNotAnAddress(text: String, problem: HostPort.Problem) {
        #expect(throws: problem) { try HostPort.parse(text) }
    }
}
