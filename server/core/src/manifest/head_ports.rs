//! The head's ports, defined once: where Ray listens (GCS, dashboard and
//! Jobs API, Ray client) and where Krayne's bootstrap puts the optional
//! services (its script binds these; a test there checks they agree).

/// Ray's GCS server.
pub const GCS: u16 = 6379;
/// Ray's dashboard and Jobs API.
pub const DASHBOARD: u16 = 8265;
/// The Ray client server.
pub const CLIENT: u16 = 10001;
/// Jupyter.
pub const NOTEBOOK: u16 = 8888;
/// code-server.
pub const CODE_SERVER: u16 = 8443;
/// sshd.
pub const SSH: u16 = 22;

/// Head ports krayne reports as services, in Krayne's order: name,
/// scheme of the in-cluster URL, port.
pub const SERVICE_PORTS: [(&str, &str, u16); 5] = [
    ("dashboard", "http", DASHBOARD),
    ("client", "ray", CLIENT),
    ("notebook", "http", NOTEBOOK),
    ("code-server", "http", CODE_SERVER),
    ("ssh", "ssh", SSH),
];
