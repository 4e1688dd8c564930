//! Functions registered from Rust and assigns from `serde::Serialize` values.

use galleon_template::{Assigns, Engine, ErrorKind, Limits, Value};

fn render(engine: &Engine, assigns: &Assigns) -> Result<String, galleon_template::Error> {
    let name = engine.names().next().unwrap().to_owned();
    engine
        .render(&name, assigns)
        .map(|l| String::from_utf8(l.to_vec()).unwrap())
}

#[test]
fn registered_functions_take_typed_arguments() {
    let engine = Engine::builder()
        .function("money", |cents: i64| {
            format!("${}.{:02}", cents / 100, cents % 100)
        })
        .function("greet", |name: String, times: i64| name.repeat(times as usize))
        .function("now", || "noon")
        .function("avg", |xs: Vec<f64>| {
            if xs.is_empty() {
                Err("no values")
            } else {
                Ok(xs.iter().sum::<f64>() / xs.len() as f64)
            }
        })
        .function("MyApp.initials", |first: String, last: Option<String>| {
            let mut s: String = first.chars().take(1).collect();
            if let Some(l) = last {
                s.extend(l.chars().take(1));
            }
            s
        })
        .from_source(
            "t.html.eex",
            "<%= money(@c) %>|<%= greet(\"ab\", 2) %>|<%= now() %>|<%= avg([1, 2.5]) %>|<%= MyApp.initials(\"Ada\", nil) %><%= @c |> money() %>",
        )
        .unwrap();
    let mut a = Assigns::new();
    a.insert("c", 1999i64);
    assert_eq!(
        render(&engine, &a).unwrap(),
        "$19.99|abab|noon|1.75|A$19.99"
    );
}

#[test]
fn function_errors_are_located_at_the_call() {
    let engine = Engine::builder()
        .function("avg", |xs: Vec<f64>| {
            if xs.is_empty() {
                Err("no values")
            } else {
                Ok(xs.iter().sum::<f64>() / xs.len() as f64)
            }
        })
        .from_source("t.html.eex", "x\n  <%= avg(@xs) %>")
        .unwrap();
    let mut a = Assigns::new();
    a.insert("xs", Value::list([]));
    let e = render(&engine, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Function);
    assert_eq!((e.line(), e.column()), (Some(2), Some(7)));
    assert!(e.message().contains("avg/1: no values"), "{e}");
    a.insert("xs", vec!["a"]);
    let e = render(&engine, &a).unwrap_err();
    assert!(
        e.message()
            .contains("avg/1: argument 1: element 0: expected a number, not the string \"a\""),
        "{e}"
    );
}

#[test]
fn unknown_or_wrong_arity_functions_fail_to_compile() {
    let b = || Engine::builder().function("f", |x: i64| x + 1);
    let e = b().from_source("t", "<%= f(1, 2) %>").unwrap_err();
    assert!(
        e.is_parse() && e.message().contains("`f` does not take 2"),
        "{e}"
    );
    let e = b().from_source("t", "<%= g(1) %>").unwrap_err();
    assert_eq!(e.column(), Some(5));
    // A registered function shadows a built-in of the same name and arity.
    let e = Engine::builder()
        .function("String.upcase", |s: String| format!("<{s}>"))
        .from_source("t", "<%= String.upcase(\"a\") %>")
        .unwrap();
    assert_eq!(render(&e, &Assigns::new()).unwrap(), "&lt;a&gt;");
}

/// Regression: `link "Home", to: "/"` (a Phoenix helper galleon does not have) said "`link`
/// takes no keyword arguments"; an unknown name is unknown, with the nearest known one.
#[test]
fn unknown_functions_say_so_and_suggest_the_nearest_name() {
    let message = |source: &str| {
        Engine::builder()
            .function("money", |cents: i64| cents.to_string())
            .from_source("t.html.eex", source)
            .unwrap_err()
            .to_string()
    };
    let e = message("<nav>\n  <%= link \"Home\", to: \"/\" %></nav>");
    assert!(
        e.starts_with(
            "t.html.eex:2:7: unknown function `link/2`: `link` is a Phoenix.HTML helper, which \
             galleon does not have (only `raw`); an application registers its own with \
             `EngineBuilder::function`\n"
        ),
        "{e}"
    );
    let e = message("<%= Enum.jion(@tags, \", \") %>");
    assert!(
        e.starts_with(
            "t.html.eex:1:5: unknown function `Enum.jion/2`: did you mean `Enum.join/2`?"
        ),
        "{e}"
    );
    let e = message("<%= lenght(@xs) %>");
    assert!(e.contains("did you mean `length/1`?"), "{e}");
    let e = message("<%= @xs |> Enum.intersprese(\",\") %>");
    assert!(e.contains("did you mean `Enum.intersperse/2`?"), "{e}");
    let e = message("<%= mony(@c) %>");
    assert!(e.contains("did you mean `money/1`?"), "{e}");
    let e = message("<%= content_tag(:p, \"x\") %>");
    assert!(
        e.contains("unknown function `content_tag/2`: `content_tag` is a Phoenix.HTML helper")
            && e.ends_with("^^^^^^^^^^^"),
        "{e}"
    );
    // Nothing near, no helper: the name alone.
    let e = message("<%= Routes.page_path(@conn, :index) %>");
    assert!(
        e.starts_with("t.html.eex:1:5: unknown function `Routes.page_path/2`\n"),
        "{e}"
    );
    // Known functions keep their own messages.
    let e = message("<%= String.upcase(\"a\", x: 1) %>");
    assert!(
        e.contains("`String.upcase` takes no keyword arguments"),
        "{e}"
    );
    let e = message("<%= Enum.join(1, 2, 3) %>");
    assert!(e.contains("`Enum.join` does not take 3 argument(s)"), "{e}");
}

#[derive(serde::Serialize)]
struct Team {
    name: String,
    score: u32,
    tags: Vec<&'static str>,
    captain: Option<Player>,
}

#[derive(serde::Serialize)]
struct Player {
    name: &'static str,
}

#[derive(serde::Serialize)]
struct Page {
    title: &'static str,
    teams: Vec<Team>,
}

#[test]
fn assigns_from_serialize_structs() {
    let page = Page {
        title: "Standings & more",
        teams: vec![
            Team {
                name: "Ajax".into(),
                score: 3,
                tags: vec!["a", "b"],
                captain: Some(Player { name: "Jo" }),
            },
            Team {
                name: "Bree".into(),
                score: 1,
                tags: vec![],
                captain: None,
            },
        ],
    };
    let engine = Engine::from_source(
        "t.html.eex",
        "<h1><%= @title %></h1><%= for t <- @teams do %><%= t.name %>:<%= t.score %>[<%= Enum.join(t.tags, \",\") %>]<%= if t.captain, do: t.captain.name, else: \"-\" %>;<% end %>",
    )
    .unwrap();
    let a = Assigns::from_serialize(&page).unwrap();
    assert_eq!(
        render(&engine, &a).unwrap(),
        "<h1>Standings &amp; more</h1>Ajax:3[a,b]Jo;Bree:1[]-;"
    );
    assert!(Assigns::from_serialize(&[1, 2]).unwrap_err().is_data());
    assert_eq!(
        Value::from_serialize(&(1, "x")).unwrap(),
        Value::list([Value::Int(1), Value::str("x")])
    );
}

#[test]
fn trim_is_an_engine_option() {
    let src = "<ul>\n  <%= for x <- [1, 2] do %>\n    <li><%= x %></li>\n  <% end %>\n</ul>\n";
    let trimmed = Engine::builder().trim(true).from_source("t", src).unwrap();
    assert_eq!(
        render(&trimmed, &Assigns::new()).unwrap(),
        "<ul>\n\n    <li>1</li>\n\n    <li>2</li>\n\n</ul>\n"
    );
    let plain = Engine::from_source("t", src).unwrap();
    assert!(render(&plain, &Assigns::new()).unwrap().contains("  \n"));
}

/// Anonymous functions run under the render's step budget, may call registered functions by
/// capture, and a sort whose comparison is not an order still ends with every element.
#[test]
fn anonymous_functions_are_bounded_and_sorts_end() {
    let engine = Engine::from_source(
        "t",
        "<%= Enum.reduce(1..5000, 0, fn i, acc -> Enum.reduce(1..5000, acc, &(&1 + &2 + i)) end) %>",
    )
    .unwrap()
    .with_limits(Limits {
        max_steps: 100_000,
        ..Limits::default()
    });
    let e = engine.render("t", &Assigns::new()).unwrap_err();
    assert!(e.is_limit(), "{e}");

    let engine = Engine::builder()
        .function("money", |cents: i64| {
            format!("${}.{:02}", cents / 100, cents % 100)
        })
        .from_source(
            "t",
            "<%= Enum.map_join(@cs, \" \", &money/1) %>|<%= Enum.sort(@xs, fn _, _ -> true end) |> length %>|\
<%= Enum.sort(@xs, fn a, b -> rem(a * 7 + b, 3) == 0 end) |> Enum.sort() |> Enum.join(\",\") %>",
        )
        .unwrap();
    let mut a = Assigns::new();
    a.insert("cs", Value::list([Value::Int(150), Value::Int(7)]));
    a.insert("xs", Value::list((1..=200).rev().map(Value::Int)));
    let out = render(&engine, &a).unwrap();
    let want: Vec<String> = (1..=200).map(|i| i.to_string()).collect();
    assert_eq!(out, format!("$1.50 $0.07|200|{}", want.join(",")));

    // A parameter pattern that does not match is a located error, as Elixir's
    // FunctionClauseError.
    let engine = Engine::from_source("t", "<%= Enum.map(@xs, fn {a, _} -> a end) %>").unwrap();
    let e = render(&engine, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TypeMismatch);
    assert_eq!((e.line(), e.column()), (Some(1), Some(19)));
    assert!(e.to_string().contains("no function clause matching"), "{e}");
}
