use galleon_template_derive::Template;

#[derive(Template)]
#[template(source = "<%= for x <- @xs do %><%= y %><% end %>", name = "v.html.eex")]
struct V {
    xs: Vec<i64>,
}

fn main() {}
