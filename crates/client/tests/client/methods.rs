//! Every method of the protocol's one list is callable through the client,
//! with the list's params and result types: this module does not compile
//! otherwise.

use plan_client::{Client, ClientError, LineTransport};
use plan_core::ApprovalFilter;
use plan_protocol::*;

macro_rules! callable {
    ($($variant:ident, $constant:ident, $snake:ident => $name:literal, $params:ty, $result:ty;)+) => {
        /// Each line as a function of its types, through the generic
        /// request and through the line's own method.
        #[allow(dead_code)]
        fn every_line(client: &mut Client<LineTransport>) {
            $(
                let _: fn(&mut Client<LineTransport>, &$params) -> Result<$result, ClientError> =
                    |client, params| client.request(params);
                let _: fn(&mut Client<LineTransport>, &$params) -> Result<$result, ClientError> =
                    Client::$snake;
                // The params type names the line's method.
                assert_eq!(<$params as RequestParams>::METHOD, $name);
            )+
            let _ = client;
        }

        const LINES: usize = [$($name),+].len();
    };
}

for_each_client_method!(callable);

#[test]
fn every_method_of_the_list_is_callable_through_the_client() {
    assert_eq!(LINES, method::ALL.len());
}
