import RegistryCore
import RegistryWire

extension NodeState {
    /// Validates a forget (``Prepared/forget(_:)``): its device ID parsed.
    static func prepareForget(_ text: String) -> Result<DeviceID, WireError> {
        do throws(IdentityError) {
            return .success(try DeviceID(parsing: text))
        } catch {
            return .failure(WireError(error))
        }
    }

    /// Decides a forget (``ForgetOp``): logs and applies a tombstone on the device's merge set,
    /// unless it is gone already, and answers which IDs now answer GONE.
    ///
    /// Allowed with `admin` or `register` on the device's vendor. Another vendor's device is not
    /// found, as a resolve does not find it.
    mutating func decideForget(
        _ id: DeviceID, wallMillis: UInt64, operations: inout [LoggedOperation], access: ConnectionAccess
    ) -> ServerBody {
        guard let vendor = registry.vendor(of: id), let canonical = registry.canonical(of: id) else {
            // Known only as forgotten (its registration has not arrived): told only to who
            // reaches every vendor, as its vendor is unknown here.
            let told = registry.isGone(id) && access.reachesEveryVendor
            return .error(told ? Self.gone(id) : WireError(code: .notFound, message: "no device \(id)"))
        }
        if !access.allows(.admin, vendor: vendor.name) && !access.allows(.register, vendor: vendor.name) {
            guard access.allows(.read, vendor: vendor.name) else { return .error(WireError(code: .notFound, message: "no device \(id)")) }
            return .error(ConnectionAccess.denied(.register, vendor: vendor.name))
        }
        let aliases = (registry.resolve(canonical)?.aliases ?? []).map(\.description)
        guard !registry.isGone(canonical) else {
            return .forgetResult(ForgetResultMessage(deviceID: canonical.description, vendor: vendor.name, aliasIDs: aliases, alreadyGone: true))
        }
        let now = clock.tick(wallMillis: wallMillis)
        log(.forget(ForgetOp(device: canonical, vendor: vendor)), at: now, operations: &operations)
        return .forgetResult(ForgetResultMessage(deviceID: canonical.description, vendor: vendor.name, aliasIDs: aliases, alreadyGone: false))
    }

    /// The answer to a request that names forgotten device `id`.
    static func gone(_ id: DeviceID) -> WireError {
        WireError(code: .gone, message: "device \(id) was forgotten")
    }
}
