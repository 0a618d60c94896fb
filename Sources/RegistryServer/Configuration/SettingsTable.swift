extension NodeSetting {
    /// The Markdown table of `flags` (every setting when nil), in ``all``'s order: the settings
    /// tables of the README and docs/operations.md are this, between their `settings:begin` and
    /// `settings:end` markers (`make settings-docs` writes them; a test checks they are current).
    public static func markdownTable(flags: [String]? = nil) -> String {
        let chosen = flags.map { names in all.filter { names.contains($0.flag) } } ?? all
        var lines = [
            "| flag | environment | config-file key | default | what it does |",
            "| --- | --- | --- | --- | --- |",
        ]
        for setting in chosen {
            let value = setting.fileType == .boolean ? "" : setting.fileType == .string ? " text" : " n"
            let cells = [
                "`--\(setting.flag)\(value)`", setting.environment.map { "`\($0)`" } ?? "", "`\(setting.fileKey)`",
                setting.defaultText, setting.help,
            ]
            lines.append("| " + cells.map { $0.replacingPipes }.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension String {
    /// A table cell's text: a `|` would end the cell.
    fileprivate var replacingPipes: String {
        split(separator: "|", omittingEmptySubsequences: false).joined(separator: "\\|")
    }
}
