import RegistryCore
import RegistryStorage
import RegistryTestSupport
import Testing

/// `default-vendor.pin`: what it keeps reads back as the same scope, and a damaged pin is a typed
/// error that names the file rather than a silent fall back to the configured scope.
@Suite struct DefaultScopePinFileTests {
    @Test func aPinReadsBackAsTheScopeItKept() throws {
        let fs = SimulatedFileSystem()
        #expect(try DefaultScopePinFile.read(from: "/data", on: fs) == nil)
        let list = try PublicSuffixList(parsing: "com\nuk\nco.uk\n*.ck\n!www.ck")
        for scope in [DefaultVendorScope.labels(3), .publicSuffix(list)] {
            try DefaultScopePinFile.write(scope, to: "/data", on: fs)
            #expect(try DefaultScopePinFile.read(from: "/data", on: fs) == scope)
        }
    }

    @Test(arguments: [
        ("registry-default-vendor 2\nlabels=2\n", "does not start with"), ("registry-default-vendor 1\nlabels=1\n", "labels=N"),
        ("registry-default-vendor 1\nsomething\n", "neither"), ("registry-default-vendor 1\npublic-suffix-list\nco..uk\n", "line 1"),
        ("", "does not start with"),
    ])
    func aDamagedPinIsATypedError(_ text: String, _ fragment: String) throws {
        let fs = SimulatedFileSystem()
        try fs.replace("/data/" + DefaultScopePinFile.name, with: Array(text.utf8), inDirectory: "/data")
        do {
            _ = try DefaultScopePinFile.read(from: "/data", on: fs)
            Issue.record("read \(text.debugDescription)")
        } catch {
            guard case .corrupt(let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason.contains(DefaultScopePinFile.name) && reason.contains(fragment), "\(reason)")
        }
    }
}
