//! Orders joined with their payments per 5-s window, then the paid total
//! per user per window: a windowed join of two keyed streams, then a
//! keyed aggregate of its output.
//!
//! ```sh
//! cargo run --release --example orders_payments -- orders.csv payments.csv [paid.csv]
//! ```
//!
//! Input: `orders.csv` with `order,user,amount,time_ms` and `payments.csv`
//! with `order,time_ms`. An order counts as paid in a window if its payment
//! falls in the same 5-s window. Output: CSV `window_start,user,paid`.
//!
//! Both inputs may be out of order: the watermarks wait `MAX_DELAY_MS`
//! (default 1 000) behind the newest order or payment; records later than
//! that for their window are named on stderr at the end, with the delay
//! that would have kept them.

use air::prelude::*;

#[derive(Clone, Debug, serde::Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Order {
    order: u64,
    user: u64,
    amount: i64,
    time_ms: u64,
}

#[derive(Clone, Debug, serde::Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct Payment {
    order: u64,
    time_ms: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(orders), Some(payments)) = (args.first().cloned(), args.get(1).cloned()) else {
        return Err("usage: orders_payments ORDERS.csv PAYMENTS.csv [OUT.csv]".into());
    };
    let out = args.get(2).cloned();
    let delay: u64 = match std::env::var("MAX_DELAY_MS") {
        Ok(v) => v.parse().map_err(|e| format!("MAX_DELAY_MS={v:?}: {e}"))?,
        Err(_) => 1_000,
    };
    air::Job::from_env()?.run(|df| {
        let (me, n) = (df.index(), df.workers());
        let orders = df
            .source(CsvSource::<Order>::shard(&orders, me, n))
            .event_time(|o| o.time_ms, delay);
        let payments = df
            .source(CsvSource::<Payment>::shard(&payments, me, n))
            .event_time(|p| p.time_ms, delay);
        let rows = orders
            .key_by(|o| o.order)
            .join(payments.key_by(|p| p.order))
            .window(Tumbling::ms(5_000), |o| o.time_ms, |p| p.time_ms)
            .key_by(|j| j.left.user)
            .window(Tumbling::ms(5_000), |j| j.time())
            .aggregate(Sum::of(|j: &Joined<u64, Order, Payment>| j.left.amount))
            .map(|r| (r.start, r.key, r.value))
            .collect();
        let header = ["window_start", "user", "paid"];
        match &out {
            Some(path) => rows.sink(Csv::to_path(path).header(&header)),
            None => rows.sink(Csv::stdout().header(&header)),
        };
    })?;
    Ok(())
}
