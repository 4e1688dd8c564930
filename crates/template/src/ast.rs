//! The syntax tree the parser builds: template nodes and expressions, with byte spans.

pub(crate) use crate::span::Span;
use crate::value::Value;

/// One piece of a template.
#[derive(Debug)]
pub enum Node {
    /// Literal text (a span of the source; `text` holds it when it differs from the source, as
    /// after `<%%`).
    Text(String),
    /// `<%= expr %>`.
    Output(Expr),
    /// `<% expr %>`: evaluated, output discarded.
    Exec(Expr),
    /// `<% pattern = expr %>` (`<%= ... %>` also outputs the value): binds variables for the
    /// rest of the enclosing block.
    Bind {
        pattern: Pattern,
        value: Expr,
        output: bool,
    },
    /// `<%= for x <- xs, filter, y <- ys do %> body <% end %>`: generators and filters in order.
    For {
        qualifiers: Vec<Qualifier>,
        body: Vec<Node>,
    },
    /// `<%= case subject do %><% pattern when guard -> %>...<% end %>`.
    Case { subject: Expr, clauses: Vec<Clause> },
    /// `<%= cond do %><% condition -> %>...<% end %>`; each clause's pattern is unused.
    Cond { clauses: Vec<(Expr, Vec<Node>)> },
    /// `<%= if cond do %> then <% else %> otherwise <% end %>`; `unless` negates.
    If {
        cond: Expr,
        negate: bool,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

/// A generator or a filter of a `for`.
#[derive(Debug)]
pub enum Qualifier {
    /// `pattern <- expr`.
    Gen(Pattern, Expr),
    /// A condition: elements for which it is falsy are skipped.
    Filter(Expr),
}

/// One `pattern [when guard] ->` clause of a `case` and its body.
#[derive(Debug)]
pub struct Clause {
    pub pattern: Pattern,
    pub guard: Option<Expr>,
    pub body: Vec<Node>,
}

/// A pattern: the left side of `=`, of `<-` in a `for`, or a `case` clause.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// `x` binds; `_` and `_name` match anything (`None`).
    Var(Option<String>, Span),
    /// A literal, matched with `===` (`1` does not match `1.0`).
    Lit(Value, Span),
    /// `^x`: the value of variable `x`, compared with `===`.
    Pin(String, Span),
    /// `{a, b}`.
    Tuple(Vec<Pattern>, Span),
    /// `[a, b]`: a list of exactly these elements.
    List(Vec<Pattern>, Span),
    /// `%{key: p, "k" => q}`: a map with at least these keys, their values matching.
    Map(Vec<(String, Pattern)>, Span),
}

impl Pattern {
    pub fn span(&self) -> Span {
        match self {
            Pattern::Var(_, s)
            | Pattern::Lit(_, s)
            | Pattern::Pin(_, s)
            | Pattern::Tuple(_, s)
            | Pattern::List(_, s)
            | Pattern::Map(_, s) => *s,
        }
    }

    /// Appends the variables the pattern binds, in order, to `out`.
    pub fn bound(&self, out: &mut Vec<(String, Span)>) {
        match self {
            Pattern::Var(Some(name), span) => out.push((name.clone(), *span)),
            Pattern::Tuple(items, _) | Pattern::List(items, _) => {
                items.iter().for_each(|p| p.bound(out));
            }
            Pattern::Map(entries, _) => entries.iter().for_each(|(_, p)| p.bound(out)),
            Pattern::Var(None, _) | Pattern::Lit(..) | Pattern::Pin(..) => {}
        }
    }
}

/// An expression with its span.
#[derive(Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// Prefix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    /// `not x`: strict, `x` must be a boolean.
    Not,
    /// `!x`: truthiness.
    Bang,
    /// `-x`.
    Neg,
}

/// Infix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `or` (strict: left must be boolean).
    Or,
    /// `and` (strict).
    And,
    /// `||` (truthiness, returns an operand).
    OrElse,
    /// `&&` (truthiness, returns an operand).
    AndAlso,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `===` (`1 === 1.0` is false).
    StrictEq,
    /// `!==`.
    StrictNe,
    /// `in`: membership in a list (or a map's `{key, value}` pairs).
    In,
    /// `++` list concatenation.
    ListConcat,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `<>` string concatenation.
    Concat,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/` (always a float, as in Elixir).
    Div,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::OrElse => "||",
            BinOp::AndAlso => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::StrictEq => "===",
            BinOp::StrictNe => "!==",
            BinOp::In => "in",
            BinOp::ListConcat => "++",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Concat => "<>",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

/// One clause of an anonymous function: `params when guard -> body`.
#[derive(Debug)]
pub struct FnClause {
    pub params: Vec<Pattern>,
    pub guard: Option<Expr>,
    pub body: Expr,
}

/// One clause of a `fn` spanning tags (`fn item -> %>...<% end`): its body is template nodes,
/// whose output is the call's value (safe HTML), as EEx makes it.
#[derive(Debug)]
pub struct BlockClause {
    pub params: Vec<Pattern>,
    pub guard: Option<Expr>,
    pub body: Vec<Node>,
}

/// Expression forms.
#[derive(Debug)]
pub enum ExprKind {
    /// A literal: number, string, `true`, `false`, `nil`.
    Lit(Value),
    /// `@name`.
    Assign(String),
    /// A loop variable.
    Var(String),
    /// `expr.key`.
    Field(Box<Expr>, String),
    /// `expr[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// Prefix operator.
    Unary(UnOp, Box<Expr>),
    /// Infix operator.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `first..last`.
    Range(Box<Expr>, Box<Expr>),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{a, b}`.
    Tuple(Vec<Expr>),
    /// `%{"k" => v, k: v}` (keys are strings; `k:` and `:k` name the key `"k"`).
    Map(Vec<(Expr, Expr)>),
    /// `"a #{b} c"`: the parts, each converted with `to_string` and joined.
    Interp(Vec<Expr>),
    /// `if c, do: a, else: b` (`unless` negates; no `else:` gives `nil`).
    If {
        cond: Box<Expr>,
        negate: bool,
        then: Box<Expr>,
        otherwise: Option<Box<Expr>>,
    },
    /// `case subject do pattern -> value ... end` inside one expression: each clause is a
    /// one-parameter [`FnClause`], tried in order; none matching is a render error.
    Case {
        subject: Box<Expr>,
        clauses: Vec<FnClause>,
    },
    /// `fn x, y -> body end` (clauses tried in order), or a capture (`&(&1 * 2)` has the parameter `&1`,
    /// `&String.upcase/1` the body `String.upcase(&1)`): only an argument of the `Enum`
    /// functions that take one.
    Fn(Vec<FnClause>),
    /// `fn params -> %>body<% end`, a function whose clauses' bodies span tags: an argument of
    /// the functions that take one, as [`ExprKind::Fn`].
    FnBlock(Vec<BlockClause>),
    /// `for x <- xs, filter, do: body`: the list of the body's values (elements that do not
    /// match a generator's pattern are skipped, as in the block `for`).
    For {
        qualifiers: Vec<Qualifier>,
        body: Box<Expr>,
    },
    /// `name(args, key: value)` or `Module.name(...)`.
    Call {
        name: String,
        name_span: Span,
        args: Vec<Expr>,
        kwargs: Vec<(String, Span, Expr)>,
    },
}
