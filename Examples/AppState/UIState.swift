public import Logging
public import PrefsKV

// The UI state a client app hydrates at launch, written as an app writes it over `PersistedState`: the
// library offers the mechanism (a named, versioned, migrated state), the app its own types and defaults.
// The launch demo (Examples/LaunchDemo), the test helper and the tests share this one definition.

/// The app's colour scheme, persisted as the state `theme`. The default is ``light``.
///
/// ```swift
/// let theme = PersistedState.theme(in: ui)
/// try theme.set(.dark)
/// ```
public enum AppTheme: String, Codable, Sendable, CaseIterable {
    case light, dark, system
}

/// The sidebar's layout, persisted as the state `sidebar`. The default is collapsed, 240 points wide.
///
/// ```swift
/// let sidebar = PersistedState.sidebar(in: ui)
/// try sidebar.update { $0.isExpanded = true }
/// ```
public struct SidebarState: Codable, Sendable, Equatable {
    /// Whether the sidebar is expanded (otherwise collapsed).
    public var isExpanded: Bool
    /// Its width when expanded, in points.
    public var width: Int

    /// A sidebar layout; the defaults are the app's defaults.
    public init(isExpanded: Bool = false, width: Int = 240) {
        self.isExpanded = isExpanded
        self.width = width
    }
}

extension PersistedState where Value == AppTheme {
    /// The theme state (`theme`, version 0, default ``AppTheme/light``) in `store`, hydrated.
    ///
    /// ```swift
    /// let theme = PersistedState.theme(in: try PrefsStore(id: "ui"))
    /// ```
    public static func theme(in store: PrefsStore?, logger: Logger? = nil) -> PersistedState<AppTheme> {
        PersistedState(name: "theme", version: 0, defaults: .light, store: store, logger: logger)
    }
}

extension PersistedState where Value == SidebarState {
    /// The sidebar state (`sidebar`, version 1, default collapsed and 240 wide) in `store`, hydrated.
    ///
    /// Version 1 added the width: a version-0 state, `{"expanded":true}`, is migrated to the default width.
    ///
    /// ```swift
    /// let sidebar = PersistedState.sidebar(in: try PrefsStore(id: "ui"))
    /// ```
    public static func sidebar(in store: PrefsStore?, logger: Logger? = nil) -> PersistedState<SidebarState> {
        PersistedState(name: "sidebar", version: 1, defaults: SidebarState(), store: store, logger: logger) {
            stored in
            SidebarState(isExpanded: try stored.decode(SidebarVersion0.self).expanded)
        }
    }
}

/// The sidebar state as version 0 stored it.
private struct SidebarVersion0: Decodable {
    var expanded: Bool
}
