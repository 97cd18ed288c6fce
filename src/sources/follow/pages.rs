//! List pages bounded in bytes as well as in objects, for every list of a governed kind: a page
//! is read whole before it is parsed, and tenants choose the size of their objects. A page over
//! its bytes is asked again at the same position with a quarter of the objects, down to one
//! (which the API server's own limits bound), and the list goes on at that size: it is never
//! started over for a big object, as kube's watcher would.

use std::sync::{
    Arc,
    atomic::{AtomicU32, Ordering},
};

use axum::body::Bytes;
use http_body_util::{BodyExt as _, Either, Full, Limited};

/// The bytes one list page may take (while a page holds more than one object): 500 Ingresses
/// as ingress-nginx users write them (3 KiB each, managedFields included) take 1.5 MiB.
pub(crate) const LIST_PAGE_BYTES: usize = 4 << 20;

/// The page size after a page over its bytes: a quarter, down to one object.
pub(crate) fn shrunk(page: u32) -> u32 {
    (page / 4).max(1)
}

/// The objects a page of one list asks for at most, shared by the client that shrinks it and
/// the owner that chose it (and may grow it back between lists).
#[derive(Debug, Clone)]
pub(crate) struct PageSize(Arc<AtomicU32>);

impl PageSize {
    pub(crate) fn new(objects: u32) -> Self {
        PageSize(Arc::new(AtomicU32::new(objects.max(1))))
    }

    pub(crate) fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, objects: u32) {
        self.0.store(objects.max(1), Ordering::Relaxed);
    }

    /// After a page over its bytes: a quarter ([`shrunk`]). Returns the new size.
    pub(crate) fn shrink(&self) -> u32 {
        let to = shrunk(self.get());
        self.set(to);
        to
    }
}

/// A client like `client` whose list requests (a GET with `limit=`, not a watch) go out with at
/// most `size` objects and read at most [`LIST_PAGE_BYTES`] of a page (no bound for pages of
/// one): a page over them shrinks `size` and is asked again at the same position.
pub(crate) fn paging(client: &kube::Client, size: &PageSize) -> kube::Client {
    paging_within(client, size, LIST_PAGE_BYTES)
}

fn paging_within(client: &kube::Client, size: &PageSize, bytes: usize) -> kube::Client {
    let service = Paging { client: client.clone(), size: size.clone(), bytes };
    kube::Client::new(service, client.default_namespace())
}

/// The objects a list request asks for, if it is one: a GET with `limit=` and no `watch=true`.
/// A limit that does not parse counts as asking for any number.
fn asked(method: &axum::http::Method, query: &str) -> Option<u32> {
    let params = || query.split('&');
    if method != axum::http::Method::GET || params().any(|p| p == "watch=true" || p == "watch=1") {
        return None;
    }
    let limit = params().find_map(|p| p.strip_prefix("limit="))?;
    Some(limit.parse().ok().filter(|&n| n > 0).unwrap_or(u32::MAX))
}

/// `query` with its `limit=` set to `limit`, the rest (the continue token above all) as it was.
fn with_limit(query: &str, limit: u32) -> String {
    let set = format!("limit={limit}");
    let params = query.split('&').map(|p| if p.starts_with("limit=") { set.as_str() } else { p });
    params.collect::<Vec<_>>().join("&")
}

/// The service behind [`paging`].
#[derive(Clone)]
struct Paging {
    client: kube::Client,
    size: PageSize,
    bytes: usize,
}

type PagedBody = Either<Full<Bytes>, kube::client::Body>;

impl tower_service::Service<axum::http::Request<kube::client::Body>> for Paging {
    type Response = axum::http::Response<PagedBody>;
    type Error = kube::Error;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, kube::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), kube::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<kube::client::Body>) -> Self::Future {
        let Some(asked) = asked(request.method(), request.uri().query().unwrap_or_default()) else {
            let client = self.client.clone();
            return Box::pin(async move { Ok(client.send(request).await?.map(Either::Right)) });
        };
        let this = self.clone();
        // A list request is a GET: it has no body, so it can be sent again.
        let (parts, _) = request.into_parts();
        Box::pin(async move {
            loop {
                let limit = asked.min(this.size.get());
                let uri = &parts.uri;
                let query = with_limit(uri.query().unwrap_or_default(), limit);
                let mut uri_parts = uri.clone().into_parts();
                uri_parts.path_and_query = Some(
                    format!("{}?{query}", uri.path())
                        .parse()
                        .map_err(|e: axum::http::uri::InvalidUri| kube::Error::Service(e.into()))?,
                );
                let mut head = parts.clone();
                head.uri = axum::http::Uri::from_parts(uri_parts).map_err(|e| kube::Error::Service(e.into()))?;
                let page = axum::http::Request::from_parts(head, kube::client::Body::from(Vec::new()));
                let response = this.client.send(page).await?;
                if limit <= 1 {
                    return Ok(response.map(Either::Right));
                }
                let (head, body) = response.into_parts();
                match Limited::new(body, this.bytes).collect().await {
                    Ok(read) => {
                        return Ok(axum::http::Response::from_parts(head, Either::Left(Full::new(read.to_bytes()))));
                    }
                    Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                        let next = this.size.shrink();
                        tracing::info!(
                            list = uri.path(),
                            page = limit,
                            bytes = this.bytes,
                            next,
                            "a list page was over its bytes: continuing the list in smaller pages"
                        );
                    }
                    Err(e) => return Err(kube::Error::Service(e)),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::{Api, api::ListParams};
    use serde_json::json;

    use super::*;

    #[test]
    fn only_a_get_with_a_limit_is_a_list() {
        use axum::http::Method;
        assert_eq!(asked(&Method::GET, "limit=500&continue=abc"), Some(500));
        assert_eq!(asked(&Method::GET, "continue=abc&limit=7"), Some(7));
        assert_eq!(asked(&Method::GET, "limit=x"), Some(u32::MAX), "asks for any number");
        assert_eq!(asked(&Method::GET, "limit=0"), Some(u32::MAX), "0 is no limit to the API server");
        assert_eq!(asked(&Method::GET, ""), None, "no limit: a get, or a list the caller wants whole");
        assert_eq!(asked(&Method::GET, "limit=500&watch=true"), None, "a watch");
        assert_eq!(asked(&Method::POST, "limit=500"), None);
    }

    #[test]
    fn the_limit_is_replaced_and_the_rest_kept() {
        assert_eq!(with_limit("limit=500&continue=abc%3D", 125), "limit=125&continue=abc%3D");
        assert_eq!(with_limit("resourceVersion=&limit=7", 1), "resourceVersion=&limit=1");
    }

    #[test]
    fn the_size_shrinks_by_quarters_to_one() {
        let size = PageSize::new(500);
        let ladder: Vec<u32> = (0..5).map(|_| size.shrink()).collect();
        assert_eq!(ladder, [125, 31, 7, 1, 1]);
        assert_eq!(PageSize::new(0).get(), 1, "a page holds one object at least");
    }

    /// What the fake API server was asked: the continue token and the limit of each list.
    type Asked = Arc<Mutex<Vec<(Option<usize>, u32)>>>;

    /// An API server holding ConfigMaps of `sizes` bytes each (their data), in order, serving
    /// pages as Kubernetes does: the continue token is the position of the next object.
    fn server(sizes: Vec<usize>, asked: Asked) -> kube::Client {
        let service = tower::service_fn(move |request: axum::http::Request<kube::client::Body>| {
            let (sizes, asked) = (sizes.clone(), asked.clone());
            async move {
                let query = request.uri().query().unwrap_or_default().to_owned();
                let param = |name: &str| query.split('&').find_map(|p| p.strip_prefix(name)).map(str::to_owned);
                let from: Option<usize> = param("continue=").map(|t| t.parse().expect("a token of ours"));
                let limit: u32 = param("limit=").expect("a limit").parse().expect("a number");
                asked.lock().unwrap().push((from, limit));
                let start = from.unwrap_or(0);
                let end = (start + limit as usize).min(sizes.len());
                let items: Vec<_> = (start..end)
                    .map(|i| json!({"metadata": {"name": format!("o{i}")}, "data": {"x": "x".repeat(sizes[i])}}))
                    .collect();
                let token = if end < sizes.len() { end.to_string() } else { String::new() };
                let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
                    "metadata": {"resourceVersion": "1", "continue": token}, "items": items});
                let body = kube::client::Body::from(serde_json::to_vec(&list).expect("JSON"));
                Ok::<_, std::convert::Infallible>(axum::http::Response::new(body))
            }
        });
        kube::Client::new(service, "default")
    }

    /// Lists every ConfigMap through [`paging_within`] as the namespaced list does (asking for
    /// `ask` a page); returns the names read, in order.
    async fn list_all(client: &kube::Client, size: &PageSize, ask: u32, bytes: usize) -> Vec<String> {
        let api: Api<ConfigMap> = Api::all(paging_within(client, size, bytes));
        let (mut token, mut names) = (None::<String>, Vec::new());
        loop {
            let mut params = ListParams::default().limit(ask);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let list = api.list(&params).await.expect("a page");
            names.extend(list.items.into_iter().filter_map(|c| c.metadata.name));
            token = list.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                return names;
            }
        }
    }

    #[tokio::test]
    async fn a_page_over_its_bytes_continues_the_list_in_smaller_pages() {
        // 600 small objects, 20 of 10 kB, 100 small: a page of 500 reads 600 small ones in two
        // pages, the second (100 small, 20 big) is over 64 kB.
        let sizes: Vec<usize> = [vec![10; 600], vec![10_000; 20], vec![10; 100]].concat();
        let asked = Asked::default();
        let client = server(sizes.clone(), asked.clone());
        let size = PageSize::new(500);
        let names = list_all(&client, &size, 500, 64 * 1024).await;
        let all: Vec<String> = (0..sizes.len()).map(|i| format!("o{i}")).collect();
        assert_eq!(names, all, "every object once, in order");
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked[..3], [(None, 500), (Some(500), 500), (Some(500), 125)], "the same position, smaller");
        assert_eq!(asked.iter().filter(|(from, _)| from.is_none()).count(), 1, "never started over: {asked:?}");
        for pair in asked.windows(2) {
            let [(from, limit), (next_from, next_limit)] = pair else { unreachable!() };
            assert!(next_limit <= limit, "the pages never grow within a list: {asked:?}");
            if next_from == from {
                assert!(next_limit < limit, "a position asked again is asked for fewer objects: {asked:?}");
            }
        }
        // 6 big ones (60 kB) fit, 7 do not: the pages end at 1 object through the big ones
        // (shrunk from 7), and the list goes on at 1.
        assert_eq!(size.get(), 1);
        assert!(asked.contains(&(Some(600), 1)), "{asked:?}");
    }

    #[tokio::test]
    async fn an_object_over_the_bytes_alone_is_read_in_a_page_of_one() {
        let sizes = vec![10, 100_000, 10];
        let asked = Asked::default();
        let client = server(sizes, asked.clone());
        let size = PageSize::new(500);
        let names = list_all(&client, &size, 500, 64 * 1024).await;
        assert_eq!(names, ["o0", "o1", "o2"], "a page of one is bounded by the API server alone");
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked, [(None, 500), (None, 125), (None, 31), (None, 7), (None, 1), (Some(1), 1), (Some(2), 1)]);
    }

    #[tokio::test]
    async fn a_list_under_its_bytes_is_read_as_asked() {
        let asked = Asked::default();
        let client = server(vec![10; 1200], asked.clone());
        let size = PageSize::new(500);
        assert_eq!(list_all(&client, &size, 500, 64 * 1024).await.len(), 1200);
        assert_eq!(*asked.lock().unwrap(), [(None, 500), (Some(500), 500), (Some(1000), 500)]);
        let small = PageSize::new(125);
        let asked = Asked::default();
        let client = server(vec![10; 200], asked.clone());
        list_all(&client, &small, 500, 64 * 1024).await;
        assert_eq!(*asked.lock().unwrap(), [(None, 125), (Some(125), 125)], "the size bounds what is asked");
    }
}
