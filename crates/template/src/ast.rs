//! The syntax tree the parser builds: template nodes and expressions, with byte spans.

pub(crate) use crate::span::Span;
use crate::value::Value;

/// One piece of a template.
#[derive(Debug)]
pub(crate) enum Node {
    /// Literal text (a span of the source; `text` holds it when it differs from the source, as
    /// after `<%%`).
    Text(String),
    /// `<%= expr %>`.
    Output(Expr),
    /// `<% expr %>`: evaluated, output discarded.
    Exec(Expr),
    /// `<%= for pattern <- generator do %> body <% end %>`.
    For {
        pattern: Pattern,
        generator: Expr,
        body: Vec<Node>,
    },
    /// `<%= if cond do %> then <% else %> otherwise <% end %>`; `unless` negates.
    If {
        cond: Expr,
        negate: bool,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
}

/// The left side of `<-` in a `for`.
#[derive(Debug)]
pub(crate) enum Pattern {
    /// `x` (or `_`, as `None`).
    Var(Option<String>, Span),
    /// `{x, i}`, for `Enum.with_index`.
    Pair((Option<String>, Span), (Option<String>, Span)),
}

/// An expression with its span.
#[derive(Debug)]
pub(crate) struct Expr {
    pub(crate) kind: ExprKind,
    pub(crate) span: Span,
}

/// Prefix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    /// `not x`: strict, `x` must be a boolean.
    Not,
    /// `!x`: truthiness.
    Bang,
    /// `-x`.
    Neg,
}

/// Infix operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
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
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::OrElse => "||",
            BinOp::AndAlso => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
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

/// Expression forms.
#[derive(Debug)]
pub(crate) enum ExprKind {
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
    /// `name(args, key: value)` or `Module.name(...)`.
    Call {
        name: String,
        name_span: Span,
        args: Vec<Expr>,
        kwargs: Vec<(String, Span, Expr)>,
    },
}
