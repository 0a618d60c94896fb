import RegistryClient
import Testing

/// What a package that depends on the `RegistryClient` product sees: this file imports nothing
/// else of the project's, so it compiles only while the client carries every type its API uses.
@Suite struct ClientProductTests {
    @Test func aRequestIsBuiltWithTheClientImportAlone() throws {
        let endpoint = try Endpoint(parsing: "127.0.0.1:7400")
        let request = RegisterRequest(bundleID: "com.vendor.app1", keychain: "0F2A8C1E-6B4D-4E8A-9C3F-1D2E3F4A5B6C", idfv: nil)
        let token = try CausalToken(bytes: CausalToken().bytes)
        #expect(endpoint.port == 7400)
        #expect(throws: RegistryClientError.invalidEndpoint("::1:7400")) { try Endpoint(parsing: "::1:7400") }
        #expect(try Endpoint(parsing: "[::1]:7400").description == "[::1]:7400")
        #expect(request.bundleID == "com.vendor.app1")
        #expect(token == CausalToken())
        let refusal: RegistryClientError = .server(WireError(code: .notCaughtUp, message: "behind", retryable: true))
        #expect("\(refusal)".contains("behind"))
    }
}
