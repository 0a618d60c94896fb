import CSQLite

/// One SQLite connection, used by one thread at a time (the owner confines it).
final class SQLiteConnection {
    let handle: OpaquePointer

    init(path: String) throws(StorageError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot allocate a connection"
            sqlite3_close_v2(handle)
            throw .sqlite(code: code, message: message, context: "opening \(path)")
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    /// Rows changed by the last statement.
    var changes: Int32 { sqlite3_changes(handle) }

    /// Runs one or more statements that return no rows.
    func execute(_ sql: String, context: String) throws(StorageError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        guard code == SQLITE_OK else {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(errorMessage)
            throw .sqlite(code: code, message: message, context: context)
        }
    }

    /// The single text value a pragma or query returns.
    func scalarText(_ sql: String, context: String) throws(StorageError) -> String? {
        let statement = try prepare(sql, context: context)
        guard try statement.step(context: context) else { return nil }
        return statement.text(at: 0)
    }

    func prepare(_ sql: String, context: String) throws(StorageError) -> SQLiteStatement {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code, context: "preparing \(context)") }
        return SQLiteStatement(statement, connection: self)
    }

    func error(_ code: Int32, context: String) -> StorageError {
        .sqlite(code: code, message: String(cString: sqlite3_errmsg(handle)), context: context)
    }
}

/// A prepared statement, reset after each use.
final class SQLiteStatement {
    private let statement: OpaquePointer
    private unowned let connection: SQLiteConnection

    /// SQLite copies bound text and blobs before `bind` returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ statement: OpaquePointer, connection: SQLiteConnection) {
        self.statement = statement
        self.connection = connection
    }

    deinit {
        sqlite3_finalize(statement)
    }

    func bind(_ value: Int64, at index: Int32) {
        sqlite3_bind_int64(statement, index, value)
    }

    func bind(_ value: UInt64, at index: Int32) {
        sqlite3_bind_int64(statement, index, Int64(bitPattern: value))
    }

    func bind(_ value: String, at index: Int32) {
        sqlite3_bind_text(statement, index, value, -1, Self.transient)
    }

    func bind(_ value: [UInt8], at index: Int32) {
        value.withUnsafeBytes { raw in
            _ = sqlite3_bind_blob(statement, index, raw.baseAddress, Int32(raw.count), Self.transient)
        }
    }

    /// Steps once: true when a row is ready, false when done.
    func step(context: String) throws(StorageError) -> Bool {
        let code = sqlite3_step(statement)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            sqlite3_reset(statement)
            throw connection.error(code, context: context)
        }
    }

    /// Runs a statement that returns no rows, then resets it for reuse.
    func run(context: String) throws(StorageError) {
        defer { reset() }
        _ = try step(context: context)
    }

    func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    func int64(at column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func uint64(at column: Int32) -> UInt64 { UInt64(bitPattern: sqlite3_column_int64(statement, column)) }

    func text(at column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: pointer)
    }

    func blob(at column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
