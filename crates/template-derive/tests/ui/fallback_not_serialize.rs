// A template the derive does not compile natively renders through the runtime engine, which
// converts the fields with serde: the error names the expression that forced it and where.
use galleon_template_derive::Template;

struct Item {
    name: String,
}

#[derive(Template)]
#[template(
    source = "<h1>Items</h1>\n<ul>\n  <%= length(@items) %> items\n</ul>",
    name = "page.html.eex"
)]
struct Page {
    items: Vec<Item>,
}

fn main() {
    let _ = Page { items: vec![Item { name: "a".into() }] };
}
