import Synchronization

/// A wall clock that steps back `step` milliseconds at each reading, from `start`: an NTP step
/// back that keeps coming. What a node times by it never comes due.
func steppingBackClock(from start: UInt64, by step: UInt64) -> @Sendable () -> UInt64 {
    let wall = Mutex(start)
    return {
        wall.withLock {
            $0 -= step
            return $0
        }
    }
}
