use galleon_template_derive::Template;

#[derive(Template)]
#[template(source = "<ul>\n  <%= for x <- @xs do %>\n    <li><%= x + %></li>\n  <% end %>\n</ul>", name = "list.html.eex")]
struct List {
    xs: Vec<i64>,
}

fn main() {}
