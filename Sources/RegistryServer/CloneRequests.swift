import RegistryCore
import RegistryWire

extension NodeState {
    /// Whether a registration that decided `op` may show a clone: the cluster allows clone
    /// operations and the device's keychain took a later IDFV. Only then is
    /// ``logSuspectedClone(of:decided:wallMillis:operations:)`` called, so that nothing else
    /// keeps a copy of the operation.
    func mayLogClone(after op: RegistrationOp) -> Bool {
        clonesAllowed && registry.mayShowClone(after: op)
    }

    /// Logs the clone operation a registration just decided shows, if any (``RegistryState/suspectedClone(of:decided:policy:at:origin:key:)``),
    /// after the registration in the log. Called only when ``mayLogClone(after:)`` holds; the
    /// vendor's policy is read only then.
    mutating func logSuspectedClone(of registration: Registration, decided op: RegistrationOp, wallMillis: UInt64, operations: inout [LoggedOperation]) {
        let policy = rules.clonePolicy(of: op.device.vendor)
        guard policy.action != .off else { return }
        let time = clock.tick(wallMillis: wallMillis)
        guard let clone = registry.suspectedClone(of: registration, decided: op, policy: policy, at: time, origin: nodeID, key: mintingKey) else {
            return
        }
        log(.clone(clone), at: time, operations: &operations)
    }

    /// Answers a clones request: the suspected clones of the vendor it names (a name, or a bundle
    /// ID of the vendor), or of every vendor the caller reaches.
    func answerClones(vendor text: String, access: ConnectionAccess) -> ServerBody {
        guard access.allows(.read) else { return .error(ConnectionAccess.denied(.read)) }
        var vendor: Vendor?
        if !text.isEmpty {
            let name: String
            do throws(IdentityError) {
                name = try Self.vendorName(namedOrOwning: text, rules: rules)
            } catch {
                return .error(WireError(error))
            }
            guard access.allows(.read, vendor: name) else { return .error(ConnectionAccess.denied(.read, vendor: name)) }
            // A vendor this process never made holds nothing (``Vendor/init(known:)``).
            guard let known = Vendor(known: name) else { return .clones([]) }
            vendor = known
        }
        let clones = registry.suspectedClones(in: vendor).filter { vendor != nil || access.allows(.read, vendor: $0.vendor.name) }
        return .clones(clones.map { SuspectedCloneMessage($0) })
    }

    /// The name of the vendor `text` names, a vendor's name, else the vendor of a bundle ID,
    /// without making the vendor (a read must not add names to the process's texts,
    /// ``InternedText``).
    private static func vendorName(namedOrOwning text: String, rules: VendorRules) throws(IdentityError) -> String {
        do {
            return try rules.vendorName(named: text)
        } catch {
            guard let name = try? rules.vendorName(ofBundle: text) else { throw error }
            return name
        }
    }
}

extension SuspectedCloneMessage {
    /// The wire form of a suspected clone.
    init(_ clone: SuspectedClone) {
        let op = clone.operation
        self.init(
            deviceID: clone.device.description, vendor: clone.vendor.name, action: op.action == .split ? .split : .flag,
            laterIDFVAppearedMillis: op.appeared.millis, earlierIDFVSeenMillis: op.earlierSeen.millis, bundleID: op.bundle.value,
            newDeviceID: clone.splitDevice?.description ?? "", decidedBy: op.decidedBy.value)
    }
}
