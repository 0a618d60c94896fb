/// Waits until `condition` holds, checking it every `interval`; false when `limit` passed first.
///
/// The limit counts the time this task was given, not the clock's: a check that comes late
/// (the task waited for a thread, which a full test run's synchronous suites hold for minutes
/// on end) counts as at most ten intervals. Whatever the test waits for on that same pool waited
/// just as long, so a clock deadline would fail the test for time that nobody had; whatever it
/// waits for on threads of its own (an event loop, a queue, a child process) had that time, and
/// the next check sees what it did.
public func poll(
    upTo limit: Duration, every interval: Duration = .milliseconds(10), until condition: () async throws -> Bool
) async throws -> Bool {
    var counted = Duration.zero
    let clock = ContinuousClock()
    while try await !condition() {
        if counted >= limit { return false }
        let before = clock.now
        try await Task.sleep(for: interval)
        counted += min(clock.now - before, interval * 10)
    }
    return true
}
