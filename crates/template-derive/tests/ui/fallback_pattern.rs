// The expression quoted in the message keeps the template's braces (escaped for rustc's
// diagnostic format strings), and a field that is `Serialize` is not reported.
use galleon_template_derive::Template;

struct Point {
    x: i64,
}

#[derive(Template)]
#[template(source = "<% {a, b} = @pair %><%= a %>, <%= b %> <%= @title %>", name = "pair.html.eex")]
struct Pair {
    pair: (Point, Point),
    title: String,
}

fn main() {}
