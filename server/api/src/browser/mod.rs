//! The browser's side of krayne: the reverse proxy to clusters' web
//! services (`proxy`, its header and cookie rules in `proxy_edge`, its
//! pooled connections in `upstreams`), services at hosts of their own
//! (`apps`), and browser sessions (`sessions`: the sign-in link and its
//! page, `sign_in_page`). Kept apart from `rest`'s JSON handlers: what a
//! page sends and gets follows a browser's rules, not the API's.

pub(crate) mod apps;
pub(crate) mod proxy;
pub(crate) mod proxy_edge;
pub(crate) mod sessions;
pub(crate) mod sign_in_page;
pub(crate) mod upstreams;

pub use apps::{AppHosts, by_host};
