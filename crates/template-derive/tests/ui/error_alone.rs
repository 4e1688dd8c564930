// A template error is the only error: the calls to `render` do not add "no method named".
use galleon_template::compiled::Template;
use galleon_template_derive::Template;

#[derive(Template)]
#[template(source = "<p><%= if @ok do %>yes</p>", name = "page.html.eex")]
struct Page {
    ok: bool,
}

fn main() {
    let _ = Page { ok: true }.render();
    let _ = Page { ok: false }.stream(1024);
}
