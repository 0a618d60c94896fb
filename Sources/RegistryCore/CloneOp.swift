/// A suspected keychain clone, as the node that saw the evidence decided it, logged and
/// replicated (`docs/identity.md`, "Keychains cloned onto another phone").
///
/// The evidence: a device whose keychain UUID took a later IDFV (`laterIDFV`, claimed at
/// `appeared`) registered again with its earlier IDFV at `earlierSeen`, within the vendor's
/// window, so both phones are in use. Under ``ClonePolicy/Action/flag`` the operation only marks
/// the device. Under ``ClonePolicy/Action/split`` it also:
/// - marks `keychain` contested: a registration that presents an IDFV no longer looks the
///   keychain UUID up nor claims it, so it links no IDFV to another any more;
/// - marks the later IDFV's claim split: registrations that present it go on to its
///   ``Identifier/splitSuccessor`` claim, which `newDevice` holds, and the keychain UUID they
///   present with it (whichever it is) is neither looked up nor claimed. So nothing the later
///   phone presents leads back to `device`, and no node that holds the split merges them again.
///
/// Every effect is a set insert, a device creation or a claim, so applying clone operations
/// commutes with every other operation; two nodes that split one device at once name the same
/// new device (minted from the split claim) and the same claims.
public struct CloneOp: Hashable, Sendable {
    /// Flag or split (a policy of ``ClonePolicy/Action/off`` logs nothing).
    public enum Action: UInt8, Hashable, Sendable {
        case flag = 1
        case split = 2
    }

    public let action: Action
    /// The device both IDFVs resolved to, canonical when the node decided.
    public let device: DeviceRef
    /// The later IDFV's claim, as the device holds it (a keyed hash, at its claim generation).
    public let laterIDFV: Identifier
    /// When the later IDFV first registered: the registration that claimed it for the device.
    public let appeared: HLCTimestamp
    /// When the earlier IDFV registered again: the evidence that both phones are active.
    public let earlierSeen: HLCTimestamp
    /// The app that registered with the earlier IDFV then.
    public let bundle: BundleID
    /// Split only: the keychain claim that stops linking IDFVs.
    public let keychain: Identifier?
    /// Split only: the device the later IDFV gets.
    public let newDevice: DeviceRef?
    /// The node that saw the evidence and logged the operation.
    public let decidedBy: NodeID

    public init(
        action: Action, device: DeviceRef, laterIDFV: Identifier, appeared: HLCTimestamp, earlierSeen: HLCTimestamp,
        bundle: BundleID, keychain: Identifier? = nil, newDevice: DeviceRef? = nil, decidedBy: NodeID
    ) {
        precondition((action == .split) == (keychain != nil && newDevice != nil), "a split, and only a split, names a keychain and a new device")
        self.action = action
        self.device = device
        self.laterIDFV = laterIDFV
        self.appeared = appeared
        self.earlierSeen = earlierSeen
        self.bundle = bundle
        self.keychain = keychain
        self.newDevice = newDevice
        self.decidedBy = decidedBy
    }

    /// The claim the later IDFV moves to when split.
    public var successorClaim: Identifier { laterIDFV.splitSuccessor }

    /// What the mark is about, whatever node decided it: the device and the later IDFV.
    public var key: CloneKey { CloneKey(device: device.id.uuid, laterIDFV: laterIDFV.value) }
}

/// A suspected clone's identity: the device, and the later IDFV's claim value.
public struct CloneKey: Hashable, Sendable {
    public let device: UUID128
    public let laterIDFV: UUID128
}

extension Identifier {
    /// The claim a split moves this claim's identifier to (``CloneOp``): the claim at generation
    /// `UInt32.max` of this claim (``atGeneration(_:)``), a value no forget ever reaches.
    public var splitSuccessor: Identifier { atGeneration(.max) }
}
