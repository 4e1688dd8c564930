//! Differential test of `:erlang.float_to_binary(x, decimals: n)` against the real Erlang VM:
//! 10,000 pseudo-random doubles (a fixed seed; magnitudes from 1e-6 to 1e15, decimal halves
//! such as `1.115`, negatives, integers, powers of two and their neighbours) are formatted with
//! every `n` in `0..=6` by galleon and by one `erl` process, and the texts are compared byte for
//! byte. The values travel to `erl` as their 64-bit patterns in hex, so none is changed on the
//! way.
//!
//! When `erl` is not on `PATH` the test says so loudly on stderr and passes; CI installs
//! Debian's `elixir` package, which brings `erl`.

use std::process::Command;

use galleon_template::{Assigns, Engine, Value};

/// How many doubles are compared, each with every number of decimals in [`DECIMALS`].
const COUNT: usize = 10_000;

/// The numbers of decimals compared.
const DECIMALS: std::ops::RangeInclusive<u32> = 0..=6;

/// SplitMix64: a small deterministic generator, so every run compares the same values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The values compared: every kind of double a price list or a report formats, and the ones
/// where rounding is delicate.
fn values() -> Vec<f64> {
    let mut rng = Rng(0x6761_6c6c_656f_6e21);
    let mut out = vec![
        0.0,
        -0.0,
        0.075,
        1.115,
        0.045,
        0.015,
        0.125,
        0.375,
        2.5,
        0.5,
        1.5,
        -0.5,
        0.995,
        1.005,
        2.675,
        9.995,
        1.0e15,
        9_007_199_254_740_992.0,
        9_007_199_254_740_993.0,
    ];
    while out.len() < COUNT {
        let x = match rng.below(6) {
            // Any magnitude from 1e-6 to 1e15, uniform in the exponent.
            0 => 10f64.powf(rng.unit() * 21.0 - 6.0),
            // A decimal half at the 1st to 7th decimal (`12.345`, `0.0000005`), as a literal
            // reads it: the nearest double, just above or below the half.
            1 => {
                let places = 1 + rng.below(7) as usize;
                let digits = 1 + rng.below(9) as u32;
                let int = rng.below(10u64.pow(digits));
                let frac = rng.below(10u64.pow(places as u32 - 1));
                format!("{int}.{frac:0w$}5", w = places - 1)
                    .parse()
                    .unwrap()
            }
            // A price: cents, or a few decimals.
            2 => rng.below(10_000_000) as f64 / 10f64.powi(rng.below(4) as i32),
            // An integer, up to 2^53 and a little past it.
            3 => {
                let bits = 1 + rng.below(55);
                rng.below(1u64 << bits) as f64
            }
            // A dyadic fraction (`k / 2^m`): exact ties for some decimals.
            4 => {
                let k = rng.below(1 << 20) as f64;
                k / f64::powi(2.0, 1 + rng.below(24) as i32)
            }
            // A random bit pattern between 1e-6 and 1e15.
            _ => loop {
                let x = f64::from_bits(rng.next() >> 1);
                if (1.0e-6..1.0e15).contains(&x) {
                    break x;
                }
            },
        };
        out.push(if rng.below(3) == 0 { -x } else { x });
    }
    out
}

/// Every value with every number of decimals, one text per line, formatted by `erl`; `None`
/// when there is no `erl`.
fn erlang(values: &[f64]) -> Option<Vec<String>> {
    let probe = Command::new("erl")
        .args(["-noshell", "-eval", "halt(0)."])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let dir = std::env::temp_dir();
    let input = dir.join(format!("galleon-float-in-{}.txt", std::process::id()));
    let output = dir.join(format!("galleon-float-out-{}.txt", std::process::id()));
    let bits: String = values
        .iter()
        .map(|x| format!("{:016x}\n", x.to_bits()))
        .collect();
    std::fs::write(&input, bits).unwrap();
    let script = format!(
        "{{ok, Bin}} = file:read_file(\"{input}\"),
         Lines = binary:split(Bin, <<\"\\n\">>, [global, trim_all]),
         Text = fun(F, N) ->
             try float_to_binary(F, [{{decimals, N}}]) catch error:badarg -> <<\"badarg\">> end
         end,
         Out = [[begin <<F/float>> = <<(binary_to_integer(L, 16)):64>>, [Text(F, N), $\\n] end
                 || N <- lists:seq({lo}, {hi})] || L <- Lines],
         ok = file:write_file(\"{output}\", Out),
         halt(0).",
        input = input.display(),
        output = output.display(),
        lo = DECIMALS.start(),
        hi = DECIMALS.end(),
    );
    let run = Command::new("erl")
        .args(["-noshell", "-eval", &script])
        .output()
        .expect("run erl");
    let _ = std::fs::remove_file(&input);
    assert!(
        run.status.success(),
        "erl failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(&output).expect("erl's results");
    let _ = std::fs::remove_file(&output);
    Some(text.lines().map(str::to_owned).collect())
}

/// Every value with every number of decimals, one text per line, rendered by galleon.
fn galleon(values: &[f64]) -> Vec<String> {
    let engine = Engine::from_source(
        "floats.html.eex",
        &format!(
            "<%= for x <- @xs do %><%= for n <- {}..{} do %>\
             <%= :erlang.float_to_binary(x, decimals: n) %>\n<% end %><% end %>",
            DECIMALS.start(),
            DECIMALS.end()
        ),
    )
    .unwrap();
    let mut assigns = Assigns::new();
    assigns.insert("xs", Value::list(values.iter().map(|&x| Value::Float(x))));
    let page = engine.render("floats.html.eex", &assigns).unwrap();
    String::from_utf8(page.to_vec())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn float_to_binary_decimals_matches_erlang() {
    let values = values();
    assert_eq!(values.len(), COUNT);
    let ours = galleon(&values);
    let per_value = DECIMALS.count();
    assert_eq!(ours.len(), COUNT * per_value);
    let Some(theirs) = erlang(&values) else {
        eprintln!();
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        eprintln!("!! SKIPPED: float_to_binary(x, decimals: n) was NOT compared with Erlang:   !!");
        eprintln!("!! `erl` is not on PATH. Install it (Debian: apt-get install elixir).       !!");
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        return;
    };
    assert_eq!(theirs.len(), ours.len(), "erl answered every value");
    let mut mismatches = Vec::new();
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        if o != t {
            let x = values[i / per_value];
            let n = DECIMALS.start() + (i % per_value) as u32;
            mismatches.push(format!(
                "{x:?} (bits {:016x}), {n} decimals: galleon {o:?}, Erlang {t:?}",
                x.to_bits()
            ));
        }
    }
    eprintln!(
        "float_to_binary: {} texts compared ({COUNT} values x {per_value} decimals), {} mismatched",
        ours.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} texts differ from Erlang's, the first:\n{}",
        mismatches.len(),
        ours.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
}
