import RegistryCore
import RegistryWire

/// One unit of work the generator hands the driver: a single registration, or for
/// ``WorkloadKind/concurrentSiblings`` a pair sent at the same moment from two apps.
public struct LoadUnit: Sendable {
    public let kind: WorkloadKind
    public let vendor: Int
    public let app: Int
    public let keychain: UUID128
    public let idfv: UUID128
    /// The model device a known-device kind acts on.
    public let known: Int?
    /// The second app of a concurrent-siblings pair.
    public let partnerApp: Int?
    /// For ``WorkloadKind/bind`` and ``WorkloadKind/move``: the model account (a new one for a
    /// bind), bound to the model device ``known``.
    public let account: Int?

    public init(
        kind: WorkloadKind, vendor: Int, app: Int, keychain: UUID128, idfv: UUID128, known: Int?, partnerApp: Int?, account: Int? = nil
    ) {
        self.kind = kind
        self.vendor = vendor
        self.app = app
        self.keychain = keychain
        self.idfv = idfv
        self.known = known
        self.partnerApp = partnerApp
        self.account = account
    }

    /// How many requests the unit sends: registrations, or a move's unbind and bind.
    public var registrations: Int { partnerApp == nil && kind != .move ? 1 : 2 }
}

/// The app names the generator registers: `<prefix><v>.app<a>` (`com.load<v>.app<a>` by
/// default), so that the default vendor rule (the first two labels) makes each `<prefix><v>` one
/// vendor.
public struct LoadCatalogue: Sendable {
    public static let defaultVendorPrefix = "com.load"

    public let vendors: Int
    public let appsPerVendor: Int
    private let bundles: [String]
    private let vendorNames: [String]

    /// `vendorPrefix` must pass ``check(vendorPrefix:vendors:appsPerVendor:)`` for these counts.
    public init(vendors: Int, appsPerVendor: Int, vendorPrefix: String = defaultVendorPrefix) {
        precondition(vendors > 0 && appsPerVendor > 0)
        self.vendors = vendors
        self.appsPerVendor = appsPerVendor
        vendorNames = (0..<vendors).map { "\(vendorPrefix)\($0)" }
        bundles = (0..<vendors).flatMap { vendor in (0..<appsPerVendor).map { "\(vendorPrefix)\(vendor).app\($0)" } }
    }

    /// Refuses a prefix that does not make each `<prefix><v>` a vendor of two labels under the
    /// default rule and each `<prefix><v>.app<a>` a valid bundle ID: exactly one `.`, inside it,
    /// labels of ASCII letters, digits and `-`, and the longest name (the last vendor's last app)
    /// within a bundle ID's 255 bytes.
    public static func check(vendorPrefix: String, vendors: Int, appsPerVendor: Int) throws(LoadConfigurationError) {
        guard vendorPrefix.utf8.filter({ $0 == UInt8(ascii: ".") }).count == 1, !vendorPrefix.hasPrefix("."), !vendorPrefix.hasSuffix(".")
        else {
            throw .invalidOption("--vendor-prefix \"\(vendorPrefix)\" must be two labels such as com.load, one '.' between them")
        }
        do {
            _ = try BundleID(parsing: "\(vendorPrefix)\(max(vendors - 1, 0)).app\(max(appsPerVendor - 1, 0))")
        } catch {
            throw .invalidOption("--vendor-prefix \"\(vendorPrefix)\" does not make valid bundle IDs: \(error)")
        }
    }

    public func bundle(vendor: Int, app: Int) -> String { bundles[vendor * appsPerVendor + app] }
    public func vendorName(_ vendor: Int) -> String { vendorNames[vendor] }

    /// The request for the unit's first app.
    public func request(for unit: LoadUnit) -> RegisterRequest {
        request(vendor: unit.vendor, app: unit.app, keychain: unit.keychain, idfv: unit.idfv)
    }

    /// The request for the second app of a concurrent-siblings pair.
    public func partnerRequest(for unit: LoadUnit) -> RegisterRequest? {
        unit.partnerApp.map { request(vendor: unit.vendor, app: $0, keychain: unit.keychain, idfv: unit.idfv) }
    }

    /// The identifiers are kept as UUIDs and written as text straight into the frame.
    private func request(vendor: Int, app: Int, keychain: UUID128, idfv: UUID128) -> RegisterRequest {
        RegisterRequest(
            bundleID: bundle(vendor: vendor, app: app),
            identifiers: [
                PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, value: UUIDText(uuid: keychain)),
                PresentedIdentifier(rawKind: IdentifierKind.idfv.rawValue, value: UUIDText(uuid: idfv)),
            ])
    }
}
