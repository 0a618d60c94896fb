import Synchronization

/// Carries "storage failed" from the engine's writer queue to the service group, once.
final class FatalSignal: Sendable {
    private let state = Mutex<(triggered: Bool, action: (@Sendable () -> Void)?)>((false, nil))

    var triggered: Bool { state.withLock { $0.triggered } }

    func trigger() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.triggered else { return nil }
            state.triggered = true
            return state.action
        }
        action?()
    }

    func onTrigger(_ action: @escaping @Sendable () -> Void) {
        let fireNow = state.withLock { state -> Bool in
            state.action = action
            return state.triggered
        }
        if fireNow { action() }
    }
}
