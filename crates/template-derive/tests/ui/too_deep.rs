// An expression deeper than the parser's limit (65 terms, 64 levels of `+`): the located
// syntax error the runtime engine gives, not a stack overflow in the compiler.
use galleon_template_derive::Template;

#[derive(Template)]
#[template(source = "<p><%= 1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1+1 %></p>", name = "deep.html.eex")]
struct Deep {}

fn main() {}
