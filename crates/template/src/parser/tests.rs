//! The parser's unit tests: shapes of expressions, blocks, nesting limits.

use super::*;
use crate::ast::{ExprKind, Pattern};

fn expr(s: &str) -> Expr {
    let src = format!("<%= {s} %>");
    match parse(&src, false).unwrap().pop() {
        Some(Node::Output(e)) => e,
        other => panic!("not an output: {other:?}"),
    }
}

fn shape(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Lit(v) => format!("{v:?}"),
        ExprKind::Assign(n) => format!("@{n}"),
        ExprKind::Var(n) => n.clone(),
        ExprKind::Field(e, k) => format!("{}.{k}", shape(e)),
        ExprKind::Index(e, i) => format!("{}[{}]", shape(e), shape(i)),
        ExprKind::Unary(op, e) => format!("({op:?} {})", shape(e)),
        ExprKind::Binary(op, a, b) => {
            format!("({} {} {})", shape(a), op.symbol(), shape(b))
        }
        ExprKind::Range(a, b) => format!("({}..{})", shape(a), shape(b)),
        ExprKind::FnBlock(clauses) => clauses
            .iter()
            .map(|c| format!("fnblock/{}({} nodes)", c.params.len(), c.body.len()))
            .collect::<Vec<_>>()
            .join(";"),
        ExprKind::Fn(clauses) => clauses
            .iter()
            .map(|c| {
                let guard = c
                    .guard
                    .as_ref()
                    .map_or(String::new(), |g| format!(" when {}", shape(g)));
                format!("fn/{}{guard}({})", c.params.len(), shape(&c.body))
            })
            .collect::<Vec<_>>()
            .join(";"),
        ExprKind::Case { subject, clauses } => {
            let bodies: Vec<String> = clauses.iter().map(|c| shape(&c.body)).collect();
            format!("case({};{})", shape(subject), bodies.join(";"))
        }
        ExprKind::For { qualifiers, body } => {
            format!("for/{}({})", qualifiers.len(), shape(body))
        }
        ExprKind::List(items) | ExprKind::Tuple(items) | ExprKind::Interp(items) => {
            format!(
                "[{}]",
                items.iter().map(shape).collect::<Vec<_>>().join(",")
            )
        }
        ExprKind::Map(entries) => entries
            .iter()
            .map(|(k, v)| format!("{}=>{}", shape(k), shape(v)))
            .collect::<Vec<_>>()
            .join(","),
        ExprKind::If {
            cond,
            then,
            otherwise,
            ..
        } => format!(
            "if({},{},{})",
            shape(cond),
            shape(then),
            otherwise.as_ref().map_or("-".to_owned(), |o| shape(o))
        ),
        ExprKind::Call {
            name, args, kwargs, ..
        } => format!(
            "{name}({}{})",
            args.iter().map(shape).collect::<Vec<_>>().join(","),
            kwargs
                .iter()
                .map(|(k, _, v)| format!(",{k}:{}", shape(v)))
                .collect::<String>()
        ),
    }
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(shape(&expr("1 + 2 * 3")), "(1 + (2 * 3))");
    assert_eq!(shape(&expr("1 - 2 - 3")), "((1 - 2) - 3)");
    assert_eq!(
        shape(&expr("\"a\" <> \"b\" <> \"c\"")),
        "(\"a\" <> (\"b\" <> \"c\"))"
    );
    assert_eq!(
        shape(&expr("a.b[0] == 1 and not c or d")),
        "(((a.b[0] == 1) and (Not c)) or d)"
    );
    assert_eq!(shape(&expr("1..@n + 1")), "(1..(@n + 1))");
    assert_eq!(shape(&expr("-5")), "-5");
    assert_eq!(
        shape(&expr("render(\"x.html.eex\", a: 1, b: @b)")),
        "render(\"x.html.eex\",a:1,b:@b)"
    );
    assert_eq!(shape(&expr("String.upcase(x)")), "String.upcase(x)");
    assert_eq!(
        shape(&expr("@xs |> Enum.map(1) |> Enum.join(\",\")")),
        "Enum.join(Enum.map(@xs,1),\",\")"
    );
    assert_eq!(shape(&expr("a in [1] and b")), "((a in [1]) and b)");
    assert_eq!(shape(&expr("if a, do: 1, else: 2")), "if(a,1,2)");
    assert_eq!(shape(&expr("x not in [1]")), "(Not (x in [1]))");
}

#[test]
fn anonymous_functions_and_captures() {
    assert_eq!(shape(&expr("fn x -> x * 2 end")), "fn/1((x * 2))");
    assert_eq!(shape(&expr("fn x, acc -> acc end")), "fn/2(acc)");
    assert_eq!(shape(&expr("fn -> 1 end")), "fn/0(1)");
    assert_eq!(
        shape(&expr("fn 3 -> :three; x when x > 9 -> x end")),
        "fn/1(:three);fn/1 when (x > 9)(x)"
    );
    // Clauses on their own lines; a line break also ends a call without parentheses.
    assert_eq!(
        shape(&expr("fn\n  0 -> f\n  x -> x\nend")),
        "fn/1(f);fn/1(x)"
    );
    assert_eq!(shape(&expr("&(&1 + 1)")), "fn/1((&1 + 1))");
    assert_eq!(shape(&expr("& &1.name")), "fn/1(&1.name)");
    assert_eq!(shape(&expr("&(&2 <> &1)")), "fn/2((&2 <> &1))");
    assert_eq!(shape(&expr("&String.upcase/1")), "fn/1(String.upcase(&1))");
    assert_eq!(shape(&expr("&rem/2")), "fn/2(rem(&1,&2))");
    assert_eq!(
        shape(&expr("@xs |> Enum.map(&(&1 * 2)) |> length")),
        "length(Enum.map(@xs,fn/1((&1 * 2))))"
    );
    assert_eq!(shape(&expr("for x <- @xs, x > 1, do: x")), "for/2(x)");
    assert_eq!(
        shape(&expr("Enum.join(for(x <- @xs, do: x))")),
        "Enum.join(for/1(x))"
    );
    for (bad, why) in [
        ("for x <- @xs, do x", "unexpected keyword `do`"),
        ("fn x -> x", "expected `end` closing the `fn`"),
        ("fn x -> x y", "expected `end` closing the `fn`"),
        (
            "fn 1 -> :a; x, y -> x end",
            "must take the same number of parameters",
        ),
        ("fn x x end", "not a pattern"),
        ("fn x y -> x end", "not a pattern"),
        ("fn x, x -> x end", "bound twice"),
        ("&(1 + 1)", "must use its argument `&1`"),
        ("&(&2)", "&2 cannot be defined without &1"),
        ("&(&9)", "expected &1 to &8"),
    ] {
        let e = parse(&format!("<%= {bad} %>"), false).unwrap_err();
        assert!(e.message.contains(why), "{bad}: {}", e.message);
    }
}

#[test]
fn map_patterns() {
    let nodes = parse(
        "<%= case @o do %><% %{status: \"paid\", total: t} -> %><%= t %><% %{} -> %>-<% end %>",
        false,
    )
    .unwrap();
    let [Node::Case { clauses, .. }] = &nodes[..] else {
        panic!("{nodes:?}")
    };
    match (&clauses[0].pattern, &clauses[1].pattern) {
        (Pattern::Map(first, _), Pattern::Map(empty, _)) => {
            let keys: Vec<&str> = first.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["status", "total"]);
            assert!(matches!(first[1].1, Pattern::Var(Some(ref n), _) if n == "t"));
            assert!(empty.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let e = parse("<% %{@k => v} = @m %>", false).unwrap_err();
    assert!(
        e.message.contains("keys are atoms or strings"),
        "{}",
        e.message
    );
    let e = parse("<% %{a: x, b: x} = @m %>", false).unwrap_err();
    assert!(e.message.contains("bound twice"), "{}", e.message);
}

/// Calls without parentheses, as Phoenix templates write them (`raw @html`): the arguments
/// are whole expressions, up to a token after one that is not a comma.
#[test]
fn calls_without_parentheses() {
    assert_eq!(shape(&expr("raw @html")), "raw(@html)");
    assert_eq!(shape(&expr("length @xs > 0")), "length((@xs > 0))");
    assert_eq!(
        shape(&expr("String.upcase @a <> \"!\"")),
        "String.upcase((@a <> \"!\"))"
    );
    assert_eq!(
        shape(&expr("render \"x.html.eex\", a: 1")),
        "render(\"x.html.eex\",a:1)"
    );
    assert_eq!(shape(&expr("f g x, [1]")), "f(g(x,[1]))");
    assert_eq!(
        shape(&expr("@xs |> Enum.join \",\"")),
        "Enum.join(@xs,\",\")"
    );
    // Still operators and indexes, not calls (Elixir reads `x -1` as `x(-1)`, ambiguous).
    assert_eq!(shape(&expr("x - 1")), "(x - 1)");
    assert_eq!(shape(&expr("x -1")), "(x - 1)");
    assert_eq!(shape(&expr("x in [1]")), "(x in [1])");
    assert_eq!(shape(&expr("x[0]")), "x[0]");
    match parse(
        "<%= for x <- Enum.reverse @xs do %><%= x %><% end %>",
        false,
    )
    .unwrap()
    .as_slice()
    {
        [Node::For { qualifiers, .. }] => match &qualifiers[..] {
            [Qualifier::Gen(_, e)] => assert_eq!(shape(e), "Enum.reverse(@xs)"),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// `fn` and `with` blocks over several tags, `into:` and aliased generators.
#[test]
fn blocks_across_tags() {
    let nodes = parse(
        "<%= Enum.map(@xs, fn 0 -> %>a<% n when n > 1 -> %>b<%= n %><% end) |> length %>",
        false,
    )
    .unwrap();
    match &nodes[..] {
        [Node::Output(e)] => assert_eq!(
            shape(e),
            "length(Enum.map(@xs,fnblock/1(1 nodes);fnblock/1(2 nodes)))"
        ),
        other => panic!("{other:?}"),
    }
    // Opened with `<%`, the call is evaluated and its binding kept.
    match &parse(
        "<% rows = Enum.map(@xs, fn x -> %><%= x %><% end) %>",
        false,
    )
    .unwrap()[..]
    {
        [Node::Bind { output: false, .. }] => {}
        other => panic!("{other:?}"),
    }
    match &parse("<%= for %{id: id} = row <- @rows do %><% end %>", false).unwrap()[..] {
        [Node::For { qualifiers, .. }] => assert_eq!(qualifiers.len(), 2),
        other => panic!("{other:?}"),
    }
    match &parse("<%= for x <- @xs, into: \"\" do %><% end %>", false).unwrap()[..] {
        [Node::Bind { .. }, Node::Output(_), Node::For { .. }] => {}
        other => panic!("{other:?}"),
    }
    match &parse(
        "<%= with {:ok, x} when x > 1 <- @r do %><%= x %><% else _ -> %>-<% end %>",
        false,
    )
    .unwrap()[..]
    {
        [Node::Case { clauses, .. }] => assert_eq!(clauses.len(), 2),
        other => panic!("{other:?}"),
    }
    for (bad, why) in [
        (
            "<%= Enum.map(@xs, fn x -> %>a",
            "`fn` block is never closed with `<% end) %>`",
        ),
        ("<%= for x <- @xs do %><% end) %>", "`end` must stand alone"),
        (
            "<%= Enum.map(@xs, fn x -> %><% x, y -> %><% end) %>",
            "same number of parameters",
        ),
        (
            "<%= Enum.map(@xs, fn x -> %><% else %><% end) %>",
            "`fn` has no `else` branch",
        ),
        (
            "<%= with x <- @x do %><% else %><% end %>",
            "first clause in the same tag",
        ),
        (
            "<%= with x <- @x do %><% y -> %><% end %>",
            "follow its `else`",
        ),
        (
            "<%= with x <- @x do %><% else y -> %><% else z -> %><% end %>",
            "a second `else`",
        ),
        (
            "<%= with x when x <- 1, y when y = 2 do x end %>",
            "expected `<-` after",
        ),
        ("<%= for %{a: x} = x <- @xs do %><% end %>", "bound twice"),
        (
            "<%= for %{a: x} = y do %><% end %>",
            "expected `<-` after `pattern = variable`",
        ),
        ("<%= for x <- @xs, into: [] %>", "expected `do:`"),
    ] {
        let e = parse(bad, false).unwrap_err();
        assert!(e.message.contains(why), "{bad}: {}", e.message);
    }
}

#[test]
fn blocks_nest() {
    let nodes = parse(
        "<%= for x <- @xs do %><%= if x do %>a<% else %>b<% end %><% end %>",
        false,
    )
    .unwrap();
    match &nodes[..] {
        [Node::For { body, .. }] => match &body[..] {
            [
                Node::If {
                    then, otherwise, ..
                },
            ] => {
                assert_eq!((then.len(), otherwise.len()), (1, 1));
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let src = format!("<%= {}1{} %>", "(".repeat(10_000), ")".repeat(10_000));
    assert!(parse(&src, false).is_err());
    let src = format!("<%= {}1 %>", "-".repeat(10_000));
    assert!(parse(&src, false).is_err());
    let src = "<%= if true do %>".repeat(1000);
    assert!(parse(&src, false).is_err());
}
