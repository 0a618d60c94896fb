import Dispatch
import NIOConcurrencyHelpers

/// A bounded first-in, first-out hand-over between one producer thread and one consumer thread,
/// which block (on semaphores) when it is full or empty: the producer can run at most `capacity`
/// items ahead, which bounds the memory a slow consumer lets pile up.
final class BoundedHandoff<Item: Sendable>: Sendable {
    private let free: DispatchSemaphore
    private let filled = DispatchSemaphore(value: 0)
    private let items = NIOLockedValueBox<[Item]>([])

    init(capacity: Int) {
        free = DispatchSemaphore(value: capacity)
    }

    func put(_ item: Item) {
        free.wait()
        items.withLockedValue { $0.append(item) }
        filled.signal()
    }

    func take() -> Item {
        filled.wait()
        let item = items.withLockedValue { $0.removeFirst() }
        free.signal()
        return item
    }
}
