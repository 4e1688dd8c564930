// `native` on a template that compiles natively: it builds (its fields need no
// `serde::Serialize`) and renders.
use galleon_template::compiled::Template;
use galleon_template_derive::Template;

struct Item {
    name: String,
    stock: u32,
}

#[derive(Template)]
#[template(
    source = "<ul><%= for {x, i} <- Enum.with_index(@items, 1), x.stock > 0 do %>\
<li<%= if i == 1 do %> class=\"first\"<% end %>><%= i %>. <%= x.name %></li><% end %></ul>\
<%= raw(@footer) %>",
    name = "items.html.eex",
    native
)]
struct Items {
    items: Vec<Item>,
    footer: String,
}

fn main() {
    let page = Items {
        items: vec![
            Item { name: "a & b".into(), stock: 2 },
            Item { name: "gone".into(), stock: 0 },
            Item { name: "c".into(), stock: 1 },
        ],
        footer: "<hr>".into(),
    };
    assert!(<Items as Template>::SLOTS > 0, "compiled natively, not by the engine");
    let html = page.render().unwrap().to_vec();
    assert_eq!(
        String::from_utf8(html).unwrap(),
        "<ul><li class=\"first\">1. a &amp; b</li><li>3. c</li></ul><hr>"
    );
}
