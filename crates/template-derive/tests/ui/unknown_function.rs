use galleon_template_derive::Template;

// A typo in a function's name is a build error naming the function meant.
#[derive(Template)]
#[template(source = "<ul><%= Enum.jion(@tags, \", \") %></ul>", name = "tags.html.eex")]
struct Tags {
    tags: Vec<String>,
}

fn main() {}
