//! TLS to PostgreSQL by `sslmode` (issue 19), against the server named by `DATABASE_URL`: skipped
//! loudly without it, or when that server has no TLS.

#![cfg(feature = "postgres")]
use galleon_eventstore::{EventData, ExpectedVersion, OpenOptions, Store};

/// `DATABASE_URL` and the server's certificate file, when both are there.
async fn server() -> Option<(String, String)> {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("\n*** SKIPPED: TLS checks, DATABASE_URL is not set ***\n");
        return None;
    };
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let ssl: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    if ssl != "on" {
        eprintln!("\n*** SKIPPED: TLS checks, the PostgreSQL at DATABASE_URL has ssl=off ***\n");
        return None;
    }
    let cert: String = client
        .query_one("SHOW ssl_cert_file", &[])
        .await
        .unwrap()
        .get(0);
    Some((url, cert))
}

fn with(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// Opens a store at `url` in a fresh schema, uses it, and says whether its connections are
/// encrypted (`pg_stat_ssl`); the schema is dropped after.
async fn encrypted(plain_url: &str, url: &str) -> Result<bool, galleon_eventstore::Error> {
    let name = format!("galleon_tls_{}", uuid::Uuid::new_v4().simple());
    let options = OpenOptions {
        pg_schema: Some(name.clone()),
        pg_application_name: Some(name.clone()),
        ..OpenOptions::default()
    };
    let opened = Store::open_with(url, options).await;
    let (admin, conn) = tokio_postgres::connect(plain_url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let result = match opened {
        Ok(store) => {
            let event = EventData::json("T", &serde_json::json!({})).unwrap();
            store
                .append("s-1", ExpectedVersion::Any, vec![event])
                .await
                .unwrap();
            assert_eq!(store.read_all(0, 10).await.unwrap().len(), 1);
            let row = admin
                .query_one(
                    "SELECT count(*), bool_and(s.ssl) FROM pg_stat_ssl s \
                     JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
                    &[&name],
                )
                .await
                .unwrap();
            let (n, ssl): (i64, Option<bool>) = (row.get(0), row.get(1));
            assert!(n >= 1, "no connection of the store found");
            drop(store);
            Ok(ssl.unwrap_or(false))
        }
        Err(e) => Err(e),
    };
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
        .await
        .unwrap();
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_decides_encryption_and_certificate_checks() {
    let Some((url, cert)) = server().await else {
        return;
    };
    let plain = with(&url, "sslmode=disable");
    assert!(!encrypted(&plain, &url).await.unwrap(), "no sslmode: plain");
    assert!(!encrypted(&plain, &plain).await.unwrap());
    assert!(
        encrypted(&plain, &with(&url, "sslmode=require"))
            .await
            .unwrap()
    );
    assert!(
        encrypted(&plain, &with(&url, "sslmode=prefer"))
            .await
            .unwrap()
    );
    // The server's self-signed certificate is no system root: verify-full refuses it.
    let e = encrypted(&plain, &with(&url, "sslmode=verify-full"))
        .await
        .unwrap_err();
    assert!(!e.to_string().is_empty());
    if std::fs::read(&cert).is_ok() {
        let root = format!("sslrootcert={cert}");
        // Signed by the given root: verify-ca accepts it whatever name it was issued for.
        let ca = with(&url, &format!("sslmode=verify-ca&{root}"));
        assert!(encrypted(&plain, &ca).await.unwrap());
        // `require` with a root checks the chain too (libpq): accepted here.
        assert!(
            encrypted(&plain, &with(&url, &format!("sslmode=require&{root}")))
                .await
                .unwrap()
        );
    } else {
        eprintln!("\n*** SKIPPED: verify-ca, {cert} is not readable here ***\n");
    }
    let e = Store::open(&with(&url, "sslmode=sometimes"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("sslmode=sometimes: expected"), "{e}");
}
